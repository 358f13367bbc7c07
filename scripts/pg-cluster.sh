#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and `make run-postgres`.
#
#   scripts/pg-cluster.sh start DIR   a new cluster in DIR/data, listening on a
#                                     Unix socket in DIR and on 127.0.0.1:PORT
#   scripts/pg-cluster.sh stop DIR    stops it and removes DIR
#   scripts/pg-cluster.sh crash DIR   stops it as a crash would (pg_ctl stop -m
#                                     immediate: no checkpoint; the next start
#                                     replays the WAL), keeping DIR
#   scripts/pg-cluster.sh restart DIR starts it again, on the same port
#
# `start` writes DIR/conninfo (libpq key=value: host=DIR port=PORT
# user=postgres dbname=postgres) and DIR/url (the same as a postgresql://
# URL), and leaves the server log in DIR/postgres.log. Authentication is
# `trust`: anyone on this machine may connect, so it is for tests only.
# Commits are durable as in production (fsync=on, synchronous_commit=on),
# unless PG_CLUSTER_FSYNC=off: then a commit is written to the OS but not
# synced, so it survives a crash of any process (the server's too) but not
# of the machine; ctest's cluster runs so (tests/CMakeLists.txt).
# As root, the server runs as the `postgres` user (PostgreSQL refuses root),
# and DIR is given to it. The server binaries are found in $PG_BIN, else in
# the newest /usr/lib/postgresql/*/bin, else on $PATH.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|crash|restart DIR" >&2
  exit 2
}
(($# == 2)) || usage
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
data=$dir/data
log=$dir/postgres.log

die() {
  echo "pg-cluster: $*" >&2
  exit 1
}

find_bin() {
  if [[ -n ${PG_BIN:-} ]]; then
    [[ -x $PG_BIN/initdb ]] || die "PG_BIN=$PG_BIN has no initdb"
    echo "$PG_BIN"
    return
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
      echo "$d"
      return
    fi
  done
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(command -v initdb)"
    return
  fi
  die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install the" \
    "postgresql package (scripts/install-deps.sh) or set PG_BIN"
}

# Runs a server command as the cluster's owner.
as_owner() {
  if ((EUID == 0)); then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# A TCP port on 127.0.0.1 that nothing listens on now. (PostgreSQL cannot
# bind port 0 and report what it got, so the port is chosen here; `start`
# tries again with another if the server loses a race for it.)
free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

stop_server() {
  local bin=$1
  [[ -f $data/postmaster.pid ]] || return 0
  if ! as_owner "$bin/pg_ctl" -D "$data" -m fast -t 60 -w stop >/dev/null 2>&1; then
    echo "pg-cluster: a fast stop did not finish within 60 s; stopping immediately" >&2
    as_owner "$bin/pg_ctl" -D "$data" -m immediate -t 30 -w stop >/dev/null 2>&1 ||
      die "the server in $data did not stop (see $log)"
  fi
}

start() {
  local bin
  bin=$(find_bin)
  # Whatever an interrupted run left behind goes first.
  stop_server "$bin"
  rm -rf "$data" "$dir/conninfo" "$dir/url" "$log"
  if ((EUID == 0)); then
    id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user to run the server"
    chown postgres: "$dir"
    # The server must be able to reach DIR through its parents.
    runuser -u postgres -- test -x "$dir" ||
      die "user postgres cannot reach $dir (a parent directory is not searchable)"
  fi
  local fsync=${PG_CLUSTER_FSYNC:-on}
  [[ $fsync == on || $fsync == off ]] || die "PG_CLUSTER_FSYNC must be on or off, not '$fsync'"
  as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C \
    >"$dir/initdb.log" 2>&1 || die "initdb failed: $(tail -5 "$dir/initdb.log")"
  cat >>"$data/postgresql.conf" <<EOF

# pg-cluster.sh: a small cluster for tests (fsync: see PG_CLUSTER_FSYNC).
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = $fsync
synchronous_commit = on
full_page_writes = on
shared_buffers = 16MB
max_connections = 100
log_min_messages = warning
log_checkpoints = off
log_line_prefix = '%m [%p] '
EOF
  local port attempt
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    # pg_ctl -w waits (at most -t seconds) until the server accepts connections.
    if as_owner "$bin/pg_ctl" -D "$data" -l "$log" -o "-p $port" -t 60 -w start >/dev/null; then
      break
    fi
    if ((attempt == 5)) || ! grep -q "could not bind" "$log" 2>/dev/null; then
      die "the server did not start within 60 s on port $port: $(tail -5 "$log" 2>/dev/null)"
    fi
    echo "pg-cluster: port $port was taken; trying another" >&2
  done
  # The socket answers too (pg_ctl checked it; this checks what the tests use).
  local deadline=$((SECONDS + 60))
  until "$bin/pg_isready" -q -h "$dir" -p "$port" -U postgres -d postgres; do
    ((SECONDS < deadline)) ||
      die "gave up after 60 s waiting for the server to accept connections on $dir/.s.PGSQL.$port"
    sleep 0.1
  done
  echo "host='$dir' port=$port user=postgres dbname=postgres" >"$dir/conninfo"
  local host
  host=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$dir")
  echo "postgresql://postgres@/postgres?host=$host&port=$port" >"$dir/url"
  echo "pg-cluster: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on" \
    "$dir (port $port); conninfo in $dir/conninfo"
}

stop() {
  if [[ -f $data/postmaster.pid ]]; then
    stop_server "$(find_bin)"
  fi
  rm -rf "$dir"
  echo "pg-cluster: stopped; removed $dir"
}

crash() {
  [[ -f $data/postmaster.pid ]] || die "no server runs in $data"
  as_owner "$(find_bin)/pg_ctl" -D "$data" -m immediate -t 30 -w stop >/dev/null ||
    die "the server in $data did not stop (see $log)"
}

restart() {
  local bin port
  bin=$(find_bin)
  [[ -f $dir/conninfo ]] || die "no cluster in $dir (start it first)"
  port=$(sed -n 's/.*port=\([0-9]*\).*/\1/p' "$dir/conninfo")
  as_owner "$bin/pg_ctl" -D "$data" -l "$log" -o "-p $port" -t 60 -w start >/dev/null ||
    die "the server did not start again within 60 s on port $port: $(tail -5 "$log" 2>/dev/null)"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  crash) crash ;;
  restart) restart ;;
  *) usage ;;
esac
