#!/usr/bin/env python3
"""What each index of SQLite's task table costs a claim and its acknowledgement:
200,000 tasks, 256 a batch, each transaction acknowledging the previous batch
and claiming the next (as W2 does), with schema 12's indexes, with some of
them left out, and with other page sizes.

    python3 bench/claim-journal/indexes.py [ROUNDS]

Prints seconds per variant (sorted, one per round). synchronous=OFF, so it
times SQLite's work, not the disk's. Not part of any test: a measurement for
docs/BENCHMARKS.md ("The claim without its read-back")."""
import os
import sqlite3
import sys
import tempfile
import time

N, BATCH = 200_000, 256
NOW, LEASE, PURGE = 1_800_000_000_000_000, 1_800_000_030_000_000, 1_900_000_000_000_000
TABLE = """CREATE TABLE tasks(seq INTEGER PRIMARY KEY, qid INTEGER NOT NULL,
  state INTEGER NOT NULL, due INTEGER, prio INTEGER NOT NULL, attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL, payload TEXT NOT NULL, name TEXT, run_at INTEGER,
  token INTEGER, last_error TEXT, updated INTEGER, backoff_base INTEGER, backoff_cap INTEGER,
  target TEXT, response TEXT, sid INTEGER, key TEXT, korder INTEGER, worker TEXT,
  claimed INTEGER, node TEXT, attempts TEXT);"""
INDEXES = {
    "due": "CREATE INDEX tasks_due ON tasks(state, (due >> 28)) WHERE state <> 1;",
    "running": "CREATE INDEX tasks_running ON tasks(state) WHERE state = 1;",
    "name": "CREATE UNIQUE INDEX tasks_name ON tasks(name) WHERE name IS NOT NULL;",
    "korder": "CREATE INDEX tasks_korder ON tasks(qid, key, korder, prio) WHERE key IS NOT NULL;",
    "retry": "CREATE INDEX tasks_key_retry ON tasks(qid)"
             " WHERE key IS NOT NULL AND state = 0 AND attempt > 0;",
}
ACK = "UPDATE tasks SET state=2, due=?, token=NULL, updated=? WHERE +state=1 AND seq BETWEEN ? AND ?"
CLAIM = ("UPDATE tasks SET state=1, run_at=due, due=?, token=?, attempt=attempt+1, updated=?,"
         " worker='w1', claimed=?, node='n' WHERE +state=0 AND seq BETWEEN ? AND ?")
ALL = list(INDEXES)
VARIANTS = {  # name: (indexes, page size)
    "schema 12": (ALL, 4096),
    "without tasks_key_retry": ([i for i in ALL if i != "retry"], 4096),
    "without tasks_running": ([i for i in ALL if i != "running"], 4096),
    "tasks_due alone": (["due"], 4096),
    "no index": ([], 4096),
    "schema 12, 2 KiB pages": (ALL, 2048),
    "schema 12, 8 KiB pages": (ALL, 8192),
    "schema 12, 16 KiB pages": (ALL, 16384),
}


def run(indexes, page_size, path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size={page_size}")
    db.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;")
    db.executescript(TABLE + "".join(INDEXES[i] for i in indexes))
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO tasks(seq, qid, state, due, prio, attempt, max_attempts, payload, updated)"
        " VALUES(?, 1, 0, ?, 0, 0, 3, '{\"n\":12345}', ?)",
        ((i, NOW + i % 1000, NOW) for i in range(1, N + 1)))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    start = time.perf_counter()
    for lo in range(1, N + 1, BATCH):
        hi, prev = lo + BATCH - 1, lo - BATCH
        db.execute("BEGIN")
        if prev > 0:
            db.execute(ACK, (PURGE, NOW, prev, lo - 1))
        db.execute(CLAIM, (LEASE, lo, NOW, NOW, lo, hi))
        db.execute("COMMIT")
    seconds = time.perf_counter() - start
    done = db.execute("SELECT count(*) FROM tasks WHERE state <> 0").fetchone()[0]
    db.close()
    assert done == N, done
    return seconds


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as d:
        for r in range(rounds):
            names = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
            for name in names:
                indexes, page_size = VARIANTS[name]
                path = os.path.join(d, f"round{r}-variant{list(VARIANTS).index(name)}.db")
                results[name].append(run(indexes, page_size, path))
    for name, seconds in results.items():
        print(f"{name:26} " + " ".join(f"{s:.3f}" for s in sorted(seconds)) + " s")


if __name__ == "__main__":
    main()
