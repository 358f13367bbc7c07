"""The worker `python -m chronoq worker worker_app:make_worker` runs in
test_worker.py's SIGTERM test. Its handler writes ``started`` in
``$APP_DIR`` and then waits (with a deadline) until the test writes
``release``: it waits for an event, not for time to pass."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chronoq import Client, Lease, Worker


def make_worker() -> Worker:
    app_dir = Path(os.environ["APP_DIR"])
    # No prefetch: once its one task runs, no claim is in flight, so a task
    # enqueued after SIGTERM is never claimed (with prefetch, a claim sent
    # before the signal may still bring one back, and it would run).
    # The test's chronoqd runs on a test clock that stands still, so the lease
    # cannot lapse however long the test takes (and no extension comes due).
    worker = Worker(Client(timeout=10), concurrency=1, prefetch=0, wait=1000, lease=60000)

    @worker.handler(os.environ["APP_QUEUE"])
    def handle(task: Lease) -> None:
        (app_dir / f"started-{task.id}").write_text(str(task.token))
        deadline = time.monotonic() + 60
        while not (app_dir / "release").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never wrote release")
            time.sleep(0.01)
        (app_dir / f"done-{task.id}").write_text("ok")

    return worker
