#!/usr/bin/python3
"""W1 and W2 through the Python client, measured the way the Python peers are.

Usage (from the repository root, after a Release build):

    /usr/bin/python3 bench/python/client_bench.py [--workload w1|w2|all] [--runs 3]
        [--chronoqd build/release/src/server/chronoqd] [--processes 2] [--concurrency 8]
        [--prefetch N]

Each run starts a fresh chronoqd (embedded SQLite, a temporary directory,
127.0.0.1 on a free port) and stops it with SIGTERM afterwards. It prints one
JSON line per run and one per workload with the median and range.

- W1: 100,000 tasks due 1-600 s ahead (uniform, ms resolution) through
  ``Client.enqueue_many`` in requests of ``--batch`` (1,000, as the peers and
  chronoq-bench's W1 batched); tasks/s from the first request to the last
  answer, the task objects built before the clock starts.
- W2: 50,000 tasks due now, enqueued first; then ``--processes`` worker
  processes start (``python -m chronoq worker bench_worker:make``, each with
  ``--concurrency`` handler threads and the Worker's ``prefetch``: its default,
  4 x concurrency, unless ``--prefetch`` says otherwise). The handler writes one record line per
  task, as the peers' handlers do; tasks/s is (records - 1) over the time from
  the first record to the last (the peers' ``tasks_per_s``), ``wall_tasks_per_s``
  counts from the start of the worker processes.

The peers (Celery, RQ) run from ../shared/peers: ``run.sh celery w2 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

from chronoq import Client, TaskSpec  # noqa: E402

REC_LEN = 43  # "%016d %016d %08d\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Chronoqd:
    """A fresh chronoqd on a temporary directory, stopped with SIGTERM."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="client-bench-")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(os.path.join(self.dir, "chronoqd.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--data", os.path.join(self.dir, "data"), "--listen", self.url[7:]],
            stdout=subprocess.PIPE, stderr=self.log,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            raise SystemExit(f"chronoqd did not start (log: {self.log.name}): {line!r}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.log.close()
        if code != 0:
            raise SystemExit(f"chronoqd exited with {code} (log kept in {self.dir})")
        shutil.rmtree(self.dir)


def w1_delays(n: int) -> List[int]:
    r = random.Random(12345)
    return [1000 + int(r.random() * 599000) for _ in range(n)]


def run_w1(url: str, n: int, batch: int) -> Dict[str, Any]:
    client = Client(url)
    client.enqueue_many([TaskSpec("warm", {})])
    specs = [TaskSpec("bench", {"i": i}, delay=d) for i, d in enumerate(w1_delays(n))]
    t0 = time.perf_counter()
    client.enqueue_many(specs, batch_size=batch)
    seconds = time.perf_counter() - t0
    pending = client.get_queue("bench").counts.get("scheduled")
    if pending != n:
        raise SystemExit(f"W1: the queue holds {pending} scheduled tasks, expected {n}")
    client.close()
    return {"workload": "W1", "tasks_per_s": round(n / seconds), "n": n, "batch": batch}


def rec_count(d: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".rec")) // REC_LEN


def run_w2(url: str, n: int, processes: int, concurrency: int, prefetch: Optional[int],
           timeout_s: float) -> Dict[str, Any]:
    client = Client(url)
    now_ms = time.time() * 1000
    client.enqueue_many(TaskSpec("bench", {"i": i, "due": now_ms}) for i in range(n))
    rec_dir = tempfile.mkdtemp(prefix="client-bench-rec-")
    env = dict(os.environ, CHRONOQ_URL=url, REC_DIR=rec_dir, BENCH_QUEUE="bench",
               BENCH_CONCURRENCY=str(concurrency),
               BENCH_PREFETCH="" if prefetch is None else str(prefetch),
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "clients", "python"), HERE]))
    started_us = time.time() * 1e6
    workers = [
        subprocess.Popen([sys.executable, "-m", "chronoq", "worker", "bench_worker:make",
                          "--log-level", "WARNING"], env=env, cwd=HERE)
        for _ in range(processes)
    ]
    deadline = time.monotonic() + timeout_s
    while rec_count(rec_dir) < n and time.monotonic() < deadline:
        if any(w.poll() is not None for w in workers):
            raise SystemExit("W2: a worker process exited early")
        time.sleep(0.02)
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        if w.wait(60) != 0:
            raise SystemExit(f"W2: a worker exited with {w.returncode}")
    runs: List[int] = []
    ids = set()
    for f in os.listdir(rec_dir):
        with open(os.path.join(rec_dir, f), "rb") as fh:
            for line in fh:
                _, run_us, i = line.split()
                runs.append(int(run_us))
                ids.add(int(i))
    shutil.rmtree(rec_dir)
    counts = client.get_queue("bench").counts
    client.close()
    first, last = min(runs), max(runs)
    return {
        "workload": "W2", "tasks_per_s": round((len(runs) - 1) / ((last - first) / 1e6)),
        "wall_tasks_per_s": round(len(runs) / ((last - started_us) / 1e6)),
        "completed": len(runs), "unique": len(ids), "duplicates": len(runs) - len(ids),
        "succeeded": counts.get("succeeded"), "expected": n,
        "processes": processes, "concurrency": concurrency,
        "prefetch": 4 * concurrency if prefetch is None else prefetch,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["w1", "w2", "all"], default="all")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chronoqd", default=os.path.join(ROOT, "build/release/src/server/chronoqd"))
    ap.add_argument("--n1", type=int, default=100_000)
    ap.add_argument("--n2", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prefetch", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=300.0, help="W2's limit in seconds")
    args = ap.parse_args()
    workloads = ["w1", "w2"] if args.workload == "all" else [args.workload]
    for wl in workloads:
        results = []
        for _ in range(args.runs):
            server = Chronoqd(args.chronoqd)
            try:
                if wl == "w1":
                    r = run_w1(server.url, args.n1, args.batch)
                else:
                    r = run_w2(server.url, args.n2, args.processes, args.concurrency,
                               args.prefetch, args.timeout)
            finally:
                server.stop()
            print(json.dumps(r), flush=True)
            results.append(r)
        values = [r["tasks_per_s"] for r in results]
        print(json.dumps({"workload": wl.upper(), "median_tasks_per_s": statistics.median(values),
                          "min": min(values), "max": max(values), "runs": len(values)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
