#!/usr/bin/env bash
# Runs libFuzzer harnesses for a while each and says what came of it: for
# `make fuzz` (a long run, its corpus kept between runs) and for ctest's
# smoke run (--fresh: a new corpus every time, a fixed seed).
#
#   run-fuzzers.sh [--seconds N] [--runs N] [--work DIR] [--fresh] [--seed N] HARNESS...
#
# --seconds 0 runs without a time limit; --runs N stops each harness after N
# inputs (whichever limit comes first).
#
# HARNESS is a harness binary. Per harness, under DIR (default: the current
# directory): corpus/<name>/ receives the inputs that found new coverage (the
# checked-in tests/fuzz/corpus/<name>/ is read, never written), artifacts/<name>/
# any crash, leak or timeout input, logs/<name>.log libFuzzer's output.
# Prints one line per harness (executions, exec/s, new inputs) and exits 1
# when any harness failed, naming it and its crash file.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
seconds=60
max_runs=-1  # -1: no limit
work="$PWD"
fresh=0
seed=0  # 0: libFuzzer picks one
harnesses=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) max_runs="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --seed) seed="$2"; shift 2 ;;
    -*) echo "run-fuzzers.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
[[ ${#harnesses[@]} -gt 0 ]] || { echo "run-fuzzers.sh: no harness given" >&2; exit 2; }

# The harnesses that read the API's words get its dictionary; the cron and
# time parsers get theirs.
dictionary_of() {
  case "$1" in
    fuzz_cron | fuzz_cli_time) echo "$here/time.dict" ;;
    *) echo "$here/api.dict" ;;
  esac
}

# A value of libFuzzer's -print_final_stats=1 output ("stat::<name>: <value>").
stat_of() { sed -n "s/^stat::$2: *//p" "$1" | tail -n 1; }

failed=()
for harness in "${harnesses[@]}"; do
  name="$(basename "$harness")"
  corpus="$work/corpus/$name"
  artifacts="$work/artifacts/$name"
  log="$work/logs/$name.log"
  [[ $fresh == 1 ]] && rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  # -timeout: one input taking longer is a finding (the HTTP harness gives
  # up on an answer after 10 s itself). The first corpus directory is where
  # new inputs go.
  status=0
  "$harness" -max_total_time="$seconds" -runs="$max_runs" -seed="$seed" -timeout=25 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" -dict="$(dictionary_of "$name")" \
    "$corpus" "$here/corpus/$name" >"$log" 2>&1 || status=$?
  runs="$(stat_of "$log" number_of_executed_units)"
  rate="$(stat_of "$log" average_exec_per_sec)"
  added="$(stat_of "$log" new_units_added)"
  if [[ $status == 0 ]]; then
    printf '%-22s %10s runs  %6s exec/s  %5s new inputs  no crash\n' \
      "$name" "${runs:-?}" "${rate:-?}" "${added:-?}"
    continue
  fi
  crash="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
  printf '%-22s FAILED (exit %s): %s\n' "$name" "$status" "${crash:-no input written; see $log}"
  # What libFuzzer and the sanitizers said, without its progress lines.
  grep -v '^#[0-9]' "$log" | tail -n 60 >&2
  failed+=("$name")
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzzing failed: ${failed[*]} (inputs under $work/artifacts/, logs under $work/logs/)" >&2
  exit 1
fi
