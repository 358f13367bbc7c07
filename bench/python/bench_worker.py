"""The worker client_bench.py starts: a no-op handler that records when it ran.

``python -m chronoq worker bench_worker:make`` with ``CHRONOQ_URL``, ``REC_DIR``,
``BENCH_QUEUE``, ``BENCH_CONCURRENCY`` and ``BENCH_PREFETCH`` (empty: the
Worker's default) in the environment. The handler does
what the peers' handlers do (../shared/peers/lib/pycommon.py ``rec``): one
unbuffered fixed-width line per task, ``due_us run_us index``.
"""

from __future__ import annotations

import os
import time

from chronoq import Client, Lease, Worker

_fd = -1


def _record(task: Lease) -> None:
    global _fd
    if _fd < 0:
        path = os.path.join(os.environ["REC_DIR"], f"{os.getpid()}.rec")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    p = task.payload
    os.write(_fd, b"%016d %016d %08d\n" % (round(p["due"] * 1000), round(time.time() * 1e6), p["i"]))


def make() -> Worker:
    prefetch = os.environ.get("BENCH_PREFETCH")
    worker = Worker(
        Client(),
        concurrency=int(os.environ.get("BENCH_CONCURRENCY", "8")),
        prefetch=int(prefetch) if prefetch else None,
    )
    worker.register(os.environ.get("BENCH_QUEUE", "bench"), _record)
    return worker
