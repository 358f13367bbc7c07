#!/usr/bin/env bash
# W2 while a bulk reschedule runs, against W2 on the same store without it
# (docs/BENCHMARKS.md, "W2 during a bulk reschedule"): both variants hold
# BULK extra tasks due in 30 days; "run" also reschedules all of them by +1 h
# in a bulk job started just before the drain. The variants alternate in one
# sitting, the order swapped each round, so the machine's drift hits both.
#
#   bench/bulk-w2.sh BUILD_DIR [ROUNDS] [BULK] [N]
#   bench/bulk-w2.sh build/release 5 1000000 50000
#
# Prints every line as measured, then the medians and ranges per variant and
# the ratio run/idle.
set -euo pipefail
dir=$1 rounds=${2:-5} bulk=${3:-1000000} n=${4:-50000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # mode
  "$dir/bench/chronoq-bench" --workload W2 --target embedded -n "$n" --w2-bulk "$bulk" \
    --bulk-mode "$1" --dir "$out/data" 2>/dev/null | tee -a "$out/results"
}

for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(idle run); else order=(run idle); fi
  for mode in "${order[@]}"; do run "$mode"; done
done

echo
python3 - "$out/results" <<'PY'
import json, statistics, sys
runs = {"idle": [], "run": []}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    runs[r["bulk_mode"]].append(r["per_s"])
for mode, v in runs.items():
    print(f"W2 {mode:4}: median {statistics.median(v):>10,.0f} [{min(v):,.0f}-{max(v):,.0f}] ({len(v)} runs)")
print(f"run/idle: {statistics.median(runs['run']) / statistics.median(runs['idle']):.3f}")
PY
