#!/usr/bin/env bash
# Both claim-journal measurements (sqlite.py, postgres.sql), ROUNDS rounds
# each, the two modes alternating. PostgreSQL: a throwaway cluster
# (scripts/pg-cluster.sh, fsync on), removed at the end.
#   bench/claim-journal/run.sh [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
python3 "$here/sqlite.py" "$rounds" | sed 's/^/sqlite /'
dir=$(mktemp -d /tmp/claim-journal.XXXXXX)
trap '"$here/../../scripts/pg-cluster.sh" stop "$dir" >/dev/null 2>&1 || true' EXIT
"$here/../../scripts/pg-cluster.sh" start "$dir" >/dev/null
url=$(cat "$dir/url")
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then modes="rowwise journal"; else modes="journal rowwise"; fi
  for m in $modes; do
    PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$url" \
      -f "$here/postgres.sql" >/dev/null
    out=$(psql -X -v ON_ERROR_STOP=1 "$url" -c '\timing on' -c "CALL claim_journal_$m()" 2>&1) ||
      { echo "$out" >&2; exit 1; }
    grep -q "claimed 200000" <<<"$out" || { echo "$out" >&2; exit 1; }
    echo "postgres round $r $m: $(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out") ms for 200,000 tasks"
  done
done
