#!/usr/bin/env python3
"""What a claim journal would save SQLite: claim + acknowledgement of 200,000
tasks, 256 a batch, as chronoq's SQLite store does them today (each claim an
UPDATE of its rows, each acknowledgement another) against one journal record
per claimed batch and one UPDATE per task at its acknowledgement.

    python3 bench/claim-journal/sqlite.py [ROUNDS]   (or bench/claim-journal/run.sh)

Prints seconds per mode per round. Schema 12's task table and indexes;
synchronous=OFF, so it times SQLite's work, not the disk's. Not part of any
test: a measurement for docs/BENCHMARKS.md ("Not yet done")."""
import os
import sqlite3
import sys
import tempfile
import time

N, BATCH = 200_000, 256
NOW, LEASE, PURGE = 1_800_000_000_000_000, 1_800_000_030_000_000, 1_900_000_000_000_000

SCHEMA = """
CREATE TABLE tasks(seq INTEGER PRIMARY KEY, qid INTEGER NOT NULL, state INTEGER NOT NULL,
  due INTEGER, prio INTEGER NOT NULL, attempt INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
  payload TEXT NOT NULL, name TEXT, run_at INTEGER, token INTEGER, last_error TEXT,
  updated INTEGER, backoff_base INTEGER, backoff_cap INTEGER, target TEXT, response TEXT,
  sid INTEGER, key TEXT, korder INTEGER, worker TEXT, claimed INTEGER, node TEXT, attempts TEXT);
CREATE INDEX tasks_due ON tasks(state, (due >> 28)) WHERE state <> 1;
CREATE INDEX tasks_running ON tasks(state) WHERE state = 1;
CREATE UNIQUE INDEX tasks_name ON tasks(name) WHERE name IS NOT NULL;
CREATE INDEX tasks_korder ON tasks(qid, key, korder, prio) WHERE key IS NOT NULL;
CREATE INDEX tasks_key_retry ON tasks(qid) WHERE key IS NOT NULL AND state = 0 AND attempt > 0;
CREATE TABLE claims(token INTEGER PRIMARY KEY, lease_until INTEGER, worker TEXT,
  claimed INTEGER, node TEXT, lo INTEGER, hi INTEGER);
"""

# Each batch: acknowledge the previous one and claim the next, then commit
# (an acknowledgement rides on the next claim, as in W2).
ROWWISE = (
    "UPDATE tasks SET state=2, due=?, token=NULL, updated=? WHERE +state=1 AND seq BETWEEN ? AND ?",
    "UPDATE tasks SET state=1, run_at=due, due=?, token=?, attempt=attempt+1, updated=?,"
    " worker='w1', claimed=?, node='n' WHERE +state=0 AND seq BETWEEN ? AND ?",
)
JOURNAL = (
    "UPDATE tasks SET state=2, run_at=due, due=?, attempt=attempt+1, updated=?, worker='w1',"
    " claimed=?, node='n' WHERE +state=0 AND seq BETWEEN ? AND ?",
    "DELETE FROM claims WHERE token=?",
    "INSERT INTO claims VALUES(?, ?, 'w1', ?, 'n', ?, ?)",
)
# The claim reads its rows back (the payloads it hands out); counted, so
# that Python builds no row objects.
READ_BACK = "SELECT count(*), sum(length(payload)) FROM tasks WHERE seq BETWEEN ? AND ?"


def open_filled(path, schema, page_size=4096):
    """A database at `path` of `schema`, holding N scheduled tasks (also
    used by indexes.py)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size={page_size}")
    db.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;")
    db.executescript(schema)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, updated)"
        " VALUES(?, 1, 0, ?, 0, 0, 3, '{\"n\":12345}', ?)",
        ((i, NOW + i % 1000, NOW) for i in range(1, N + 1)))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


def run(mode, path):
    db = open_filled(path, SCHEMA)
    claimed = 0
    start = time.perf_counter()
    for lo in range(1, N + 1, BATCH):
        hi, prev = lo + BATCH - 1, lo - BATCH
        db.execute("BEGIN")
        if mode == "rowwise":
            if prev > 0:
                db.execute(ROWWISE[0], (PURGE, NOW, prev, lo - 1))
            db.execute(ROWWISE[1], (LEASE, lo, NOW, NOW, lo, hi))
        else:
            if prev > 0:
                db.execute(JOURNAL[0], (PURGE, NOW, NOW, prev, lo - 1))
                db.execute(JOURNAL[1], (prev,))
            db.execute(JOURNAL[2], (lo, LEASE, NOW, lo, hi))
        claimed += db.execute(READ_BACK, (lo, hi)).fetchone()[0]
        db.execute("COMMIT")
    seconds = time.perf_counter() - start
    db.close()
    assert claimed == N, claimed
    return seconds


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as d:
        for r in range(rounds):
            for mode in ("rowwise", "journal") if r % 2 == 0 else ("journal", "rowwise"):
                path = os.path.join(d, f"{mode}{r}.db")
                print(f"round {r + 1} {mode}: {run(mode, path):.3f} s for {N:,} tasks", flush=True)


if __name__ == "__main__":
    main()
