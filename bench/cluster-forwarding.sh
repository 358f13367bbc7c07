#!/usr/bin/env bash
# What forwarding costs: the same workloads against a cluster's leader and
# through its standby, in one sitting (docs/BENCHMARKS.md, "Several nodes").
#
#   bench/cluster-forwarding.sh [ROUNDS] > sitting.txt     # ROUNDS default 3
#
# Starts a throwaway PostgreSQL (scripts/pg-cluster.sh). Then, ROUNDS times,
# runs W1 batched, W2 and W3 over HTTP (chronoq-bench --target http --url)
# against the leader and against the standby of a two-node cluster
# (chronoqd --cluster, default heartbeat and lease), the order of the two
# swapped each round. Every run gets a cluster of its own: two fresh nodes on
# a fresh schema, as chronoq-bench gives every run a fresh chronoqd, so that
# no run sees the tasks of the runs before it (W1 alone leaves 100,000
# pending tasks due within 10 minutes). Prints one line per run, then per
# workload the median and range of the standby/leader ratio (tasks/s for W1
# and W2; p99 for W3, where lower is better, so its ratio reads "standby p99
# over leader p99").
#
# Builds build/release (configured as `make release-config` does) with
# JOBS=1 unless told otherwise: the machines have 2 cores shared with others.
# Environment: W1_N (100000), W2_N (50000), W3_N (5000), JOBS (1),
# KEEP=1 keeps the work directory (node logs, bench stderr) for a look;
# PG_CLUSTER_FSYNC=off (scripts/pg-cluster.sh) takes the disk's fsync out of
# the picture, to see the forwarding cost alone on a busy machine.
# Each run's line also shows the CPU seconds each node used in it (startup
# included): what forwarding costs the standby, whatever the machine's noise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
W1_N=${W1_N:-100000}
W2_N=${W2_N:-50000}
W3_N=${W3_N:-5000}
JOBS=${JOBS:-1}
BUILD=build/release

if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S . -B $BUILD -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build $BUILD -j "$JOBS" --target chronoqd chronoq-bench >&2
CHRONOQD=$BUILD/src/server/chronoqd
BENCH=$BUILD/bench/chronoq-bench

WORK=$(mktemp -d /tmp/cq-forwarding.XXXXXX)
chmod 755 "$WORK"  # PostgreSQL runs as its own user when this runs as root
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  scripts/pg-cluster.sh stop "$WORK/pg" >/dev/null 2>&1 || true
  if [[ -z ${KEEP:-} ]]; then rm -rf "$WORK"; else echo "# kept $WORK" >&2; fi
}
trap cleanup EXIT

scripts/pg-cluster.sh start "$WORK/pg" >&2
PG=$(cat "$WORK/pg/url")

# Starts a node on SCHEMA: sets NODE_PID and NODE_URL. Waits for its
# "listening on" line (its only stdout line).
start_node() {
  local id=$1 schema=$2 out=$WORK/$1.out
  : >"$out"
  "$CHRONOQD" --cluster --store "$PG&schema=$schema" --listen 127.0.0.1:0 --node-id "$id" \
    >"$out" 2>>"$WORK/$id.log" &
  NODE_PID=$!
  PIDS+=("$NODE_PID")
  local deadline=$((SECONDS + 30))
  until grep -q "listening on" "$out"; do
    kill -0 "$NODE_PID" 2>/dev/null || { echo "node $id ended: $(tail -5 "$WORK/$id.log")" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "node $id did not start within 30 s" >&2; exit 1; }
    sleep 0.05
  done
  NODE_URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$out" | head -1)
}

# Waits until GET /healthz on URL says ROLE ("leader", or "standby" with a leader to forward to).
wait_role() {
  local url=$1 role=$2 deadline=$((SECONDS + 30)) body
  while true; do
    body=$(curl -s -m 2 "$url/healthz" || true)
    if [[ $(jq -r '.role + ":" + .status' <<<"$body" 2>/dev/null) == "$role:ok" ]]; then return; fi
    ((SECONDS < deadline)) || { echo "$url is not $role after 30 s: $body" >&2; exit 1; }
    sleep 0.1
  done
}

# CPU seconds (user + system) a process has used so far, from /proc/PID/stat.
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

stop_nodes() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}

# One run: a fresh two-node cluster, WORKLOAD against TARGET (leader|standby).
# Prints "round W target figure" and the bench's JSON line.
RUN=0
run() {
  local round=$1 wl=$2 target=$3 schema url line figure
  RUN=$((RUN + 1))
  schema=fwd_$RUN
  start_node n1 "$schema"
  local leader_pid=$NODE_PID leader_url=$NODE_URL
  wait_role "$leader_url" leader
  start_node n2 "$schema"
  local standby_pid=$NODE_PID standby_url=$NODE_URL
  wait_role "$standby_url" standby
  url=$leader_url
  [[ $target == standby ]] && url=$standby_url
  local args=(--target http --url "$url" --dir "$WORK/bench")
  case $wl in
    W1) args+=(--workload W1 --mode batch -n "$W1_N") ;;
    W2) args+=(--workload W2 -n "$W2_N") ;;
    W3) args+=(--workload W3 -n "$W3_N") ;;
  esac
  line=$("$BENCH" "${args[@]}" 2>>"$WORK/bench.log") || {
    echo "chronoq-bench failed; the end of its stderr:" >&2
    tail -20 "$WORK/bench.log" >&2
    exit 1
  }
  # The leader must not have changed during the run.
  if [[ $(curl -s -m 2 "$leader_url/healthz" | jq -r .role) != leader ]]; then
    echo "round $round $wl $target: n1 no longer leads; see $WORK/n1.log" >&2
    exit 1
  fi
  local cpu
  cpu="cpu s: leader $(cpu_s "$leader_pid") standby $(cpu_s "$standby_pid")"
  stop_nodes
  psql -q "$PG" -c "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
  if [[ $wl == W3 ]]; then
    figure=$(jq -r '"p50 \(.p50_ms) p99 \(.p99_ms) max \(.max_ms) ms"' <<<"$line")
  else
    figure=$(jq -r '"\(.per_s) tasks/s"' <<<"$line")
  fi
  printf 'round %d %s %-7s %s  (%s)  %s\n' "$round" "$wl" "$target" "$figure" "$cpu" "$line"
  RESULTS+=("$round $wl $target $(jq -r 'if .workload == "W3" then .p99_ms else .per_s end' <<<"$line")")
}

RESULTS=()
echo "# cluster-forwarding: $ROUNDS rounds, W1 batch n=$W1_N, W2 n=$W2_N, W3 n=$W3_N; $(date '+%F %T')"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') (plus uncommitted changes, if any)"
for ((round = 1; round <= ROUNDS; round++)); do
  if ((round % 2 == 1)); then order=(leader standby); else order=(standby leader); fi
  echo "# round $round $(date +%T): ${order[0]} first; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for wl in W1 W2 W3; do
    for target in "${order[@]}"; do run "$round" "$wl" "$target"; done
  done
done

# The summary: per workload, per round the standby/leader ratio; its median and range.
echo "# summary: standby/leader per round (W1, W2: tasks/s; W3: p99 ms, lower is better)"
printf '%s\n' "${RESULTS[@]}" | python3 -c '
import collections, statistics, sys
fig = collections.defaultdict(dict)
for line in sys.stdin:
    rnd, wl, target, value = line.split()
    fig[(wl, int(rnd))][target] = float(value)
for wl in ("W1", "W2", "W3"):
    rounds = sorted(r for (w, r) in fig if w == wl)
    ratios = [fig[(wl, r)]["standby"] / fig[(wl, r)]["leader"] for r in rounds]
    leader = [fig[(wl, r)]["leader"] for r in rounds]
    standby = [fig[(wl, r)]["standby"] for r in rounds]
    unit = "p99 ms" if wl == "W3" else "tasks/s"
    print(f"{wl}: standby/leader median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}; per round "
          + " ".join(f"{x:.3f}" for x in ratios) + f"); leader {unit} median "
          f"{statistics.median(leader):g} ({min(leader):g}-{max(leader):g}), standby "
          f"{statistics.median(standby):g} ({min(standby):g}-{max(standby):g})")
'
