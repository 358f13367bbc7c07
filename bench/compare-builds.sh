#!/usr/bin/env bash
# Compares two builds of chronoq-bench in one sitting, alternating them, so
# the machine's drift hits both alike (docs/BENCHMARKS.md, "Comparing builds").
#
#   bench/compare-builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [WORKLOADS...]
#   bench/compare-builds.sh /work/wt-base/build/release build/release 3 W1 W2 W6
#
# TARGETS="http" and MODE=single narrow it down (both default to all).
#
# Each build dir must hold bench/chronoq-bench and src/server/chronoqd. Every
# result line is printed as measured, prefixed with the build's name; the
# medians per (workload, target, mode) and build follow.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
shift 2
if [[ $# -gt 0 ]]; then shift; fi
workloads=("$@")
if [[ ${#workloads[@]} -eq 0 ]]; then workloads=(W1 W2 W6); fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # name build_dir workload target
  local name=$1 dir=$2 workload=$3 target=$4
  "$dir/bench/chronoq-bench" --workload "$workload" --target "$target" \
    --chronoqd "$dir/src/server/chronoqd" --dir "$out/data-$name" ${MODE:+--mode "$MODE"} \
    2>/dev/null |
    sed "s/^/$name /" | tee -a "$out/results"
}

for ((r = 1; r <= rounds; r++)); do
  for workload in "${workloads[@]}"; do
    for target in ${TARGETS:-embedded http}; do
      # Alternate which build goes first from round to round.
      if ((r % 2)); then order=(old new); else order=(new old); fi
      for name in "${order[@]}"; do
        if [[ $name == old ]]; then run old "$old" "$workload" "$target"; else run new "$new" "$workload" "$target"; fi
      done
    done
  done
done

echo
echo "medians (per_s) by workload, target, mode and build:"
python3 - "$out/results" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    name, _, text = line.partition(" ")
    try:
        r = json.loads(text)
    except ValueError:
        continue
    if "per_s" not in r:
        continue
    runs[(r["workload"], r["target"], r.get("mode", ""), name)].append(r["per_s"])
keys = sorted({k[:3] for k in runs})
for k in keys:
    old, new = runs.get(k + ("old",), []), runs.get(k + ("new",), [])
    if not old or not new:
        continue
    mo, mn = statistics.median(old), statistics.median(new)
    print(f"{k[0]:3} {k[1]:8} {k[2]:9} old {mo:>10,.0f} [{min(old):,.0f}-{max(old):,.0f}]"
          f"  new {mn:>10,.0f} [{min(new):,.0f}-{max(new):,.0f}]  new/old {mn / mo:.3f}")
PY
