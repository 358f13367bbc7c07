#!/usr/bin/env python3
"""What each index of SQLite's task table costs a claim and its acknowledgement:
200,000 tasks, 256 a batch, each transaction acknowledging the previous batch
and claiming the next (as W2 does), with schema 12's indexes, with some of
them left out, with other page sizes, and with SQLite's secure_delete (which
Debian builds on) FAST or OFF.

    python3 bench/claim-journal/indexes.py [ROUNDS]

Prints seconds per variant (sorted, one per round). synchronous=OFF, so it
times SQLite's work, not the disk's. Not part of any test: a measurement for
docs/BENCHMARKS.md ("The claim without its read-back")."""
import os
import re
import sys
import tempfile
import time

from sqlite import BATCH, LEASE, NOW, N, PURGE, ROWWISE, SCHEMA, open_filled  # bench/claim-journal/sqlite.py
# schema 12's task table and its indexes by name, as sqlite.py spells them
STATEMENTS = [st.strip() + ";" for st in SCHEMA.split(";") if st.strip()]
TABLE = next(st for st in STATEMENTS if st.startswith("CREATE TABLE tasks("))
INDEXES = {re.search(r"INDEX (\w+) ON", st).group(1): st for st in STATEMENTS if " INDEX " in st}
ACK, CLAIM = ROWWISE
ALL = list(INDEXES)
VARIANTS = {  # name: (indexes, page size, secure_delete)
    "schema 12": (ALL, 4096, "ON"),  # Debian's libsqlite3 is built with SECURE_DELETE on
    "schema 12, secure_delete=FAST": (ALL, 4096, "FAST"),
    "schema 12, secure_delete=OFF": (ALL, 4096, "OFF"),
    "without tasks_key_retry": ([i for i in ALL if i != "tasks_key_retry"], 4096, "ON"),
    "without tasks_running": ([i for i in ALL if i != "tasks_running"], 4096, "ON"),
    "tasks_due alone": (["tasks_due"], 4096, "ON"),
    "no index": ([], 4096, "ON"),
    "schema 12, 2 KiB pages": (ALL, 2048, "ON"),
    "schema 12, 8 KiB pages": (ALL, 8192, "ON"),
    "schema 12, 16 KiB pages": (ALL, 16384, "ON"),
}


def run(indexes, page_size, secure_delete, path):
    db = open_filled(path, TABLE + "".join(INDEXES[i] for i in indexes), page_size)
    db.execute(f"PRAGMA secure_delete={secure_delete}")
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
                indexes, page_size, secure_delete = VARIANTS[name]
                path = os.path.join(d, f"round{r}-variant{list(VARIANTS).index(name)}.db")
                results[name].append(run(indexes, page_size, secure_delete, path))
    for name, seconds in results.items():
        print(f"{name:30} " + " ".join(f"{s:.3f}" for s in sorted(seconds)) + " s")


if __name__ == "__main__":
    main()
