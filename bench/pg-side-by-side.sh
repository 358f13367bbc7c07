#!/usr/bin/env bash
# The PostgreSQL store against the PostgreSQL-backed peers, on the same
# server, in one sitting (docs/BENCHMARKS.md, "On PostgreSQL").
#
#   bash ../shared/peers/setup.sh          # PostgreSQL 15 on 127.0.0.1:5440, database bench
#   bench/pg-side-by-side.sh [ROUNDS] > sitting.jsonl
#
# Each round runs graphile-worker's W1-W4, then chronoq's (W1 batched, W2 and
# W3 over HTTP; W1 batched and W4 embedded) and PostgreSQL's own COPY of the
# same rows (chronoq-pg-baseline), then pg-boss's, then chronoq's again:
# every chronoq figure has a peer's from the minutes before it. JSON lines on
# stdout ("# round N" between rounds); the peers' lines are run.sh's own.
# Needs a Release build (make release). PEERS and PG override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
PEERS=${PEERS:-../shared/peers}
PG=${PG:-postgresql://postgres@127.0.0.1:5440/bench}
BENCH=./build/release/bench/chronoq-bench
[[ -x $BENCH ]] || { echo "no $BENCH: run make release" >&2; exit 1; }
chronoq() {
  $BENCH --workload W1 --mode batch --target http --store "$PG" 2>/dev/null
  $BENCH --workload W2 --target http --store "$PG" 2>/dev/null
  $BENCH --workload W3 --target http --store "$PG" 2>/dev/null
  $BENCH --workload W1 --mode batch --target embedded --store "$PG" 2>/dev/null
  $BENCH --workload W4 --target embedded --store "$PG" 2>/dev/null
  ./build/release/bench/chronoq-pg-baseline --store "$PG" 2>/dev/null
}
for ((round = 1; round <= ROUNDS; round++)); do
  echo "# round $round $(date +%T)"
  bash "$PEERS/run.sh" graphile-worker all 1 2>/dev/null
  chronoq
  bash "$PEERS/run.sh" pg-boss all 1 2>/dev/null
  chronoq
done
