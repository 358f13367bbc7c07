"""The Worker against a real chronoqd."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest

import chronoq.worker as worker_mod
from chronoq import Client, Lease, RetryLater, Worker
from conftest import PACKAGE_ROOT, Server, wait_for


@pytest.fixture()
def started() -> Iterator[List[Worker]]:
    """Workers started in the test; stopped at the end whatever happens."""
    workers: List[Worker] = []
    yield workers
    for w in workers:
        w.shutdown(flush_timeout=5)


def start(worker: Worker, started: List[Worker]) -> Worker:
    worker.start()
    started.append(worker)
    return worker


def state_of(client: Client, id: str) -> str:
    return client.get(id).state


def test_handler_success(client: Client, q: str, started: List[Worker]) -> None:
    seen: List[Any] = []
    w = Worker(client, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        seen.append(task.payload)

    start(w, started)
    t = client.enqueue(q, {"n": 1})
    wait_for(lambda: state_of(client, t.id) == "succeeded", "the task to succeed")
    assert seen == [{"n": 1}]
    wait_for(lambda: w.stats.succeeded == 1, "the worker to count the ack's result")
    assert w.stats.claimed == 1 and w.stats.refused == 0


def test_worker_names_itself_host_pid(client: Client, q: str, started: List[Worker]) -> None:
    w = Worker(client, wait=1000)
    assert w.worker_name == f"{socket.gethostname()}:{os.getpid()}"
    w.register(q, lambda task: None)
    start(w, started)
    t = client.enqueue(q, 1)
    wait_for(lambda: state_of(client, t.id) == "succeeded", "the task to succeed")
    assert client.get(t.id).worker == f"{socket.gethostname()}:{os.getpid()}"


def test_worker_name_option(client: Client, q: str, started: List[Worker]) -> None:
    w = Worker(client, wait=1000, worker_name="billing-7")
    w.register(q, lambda task: None)
    start(w, started)
    t = client.enqueue(q, 1)
    wait_for(lambda: state_of(client, t.id) == "succeeded", "the task to succeed")
    assert client.get(t.id).worker == "billing-7"


def test_default_worker_name_fits_200_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "\u00e9" * 150)  # 300 bytes
    name = worker_mod.default_worker_name()
    assert name.endswith(f":{os.getpid()}") and len(name.encode()) <= 200
    assert name.startswith("\u00e9" * 90)


def test_a_bad_worker_name_stops_the_worker(client: Client, q: str) -> None:
    w = Worker(client, wait=1000, worker_name="bad\nname")
    w.register(q, lambda t: None)
    from chronoq import InvalidArgument

    with pytest.raises(InvalidArgument) as ei:
        w.run(install_signal_handlers=False)
    assert ei.value.field == "worker"


def test_exception_fails_with_the_traceback(client: Client, q: str, started: List[Worker]) -> None:
    w = Worker(client, wait=1000)

    def deep(n: int) -> None:
        raise ValueError(f"boom {n}")

    def handler(task: Lease) -> None:
        deep(task.payload)

    w.register(q, handler)
    start(w, started)
    t = client.enqueue(q, 7, max_attempts=1)
    wait_for(lambda: state_of(client, t.id) == "dead", "the failing task to go dead")
    err = client.get(t.id).last_error or ""
    lines = err.splitlines()
    assert lines[-1] == "ValueError: boom 7"
    assert any("in deep" in line for line in lines) and any("in handler" in line for line in lines)
    assert len(lines) <= 12


def test_retry_later_chooses_the_delay(client: Client, q: str, started: List[Worker]) -> None:
    w = Worker(client, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        raise RetryLater("rate limited", delay=timedelta(hours=1))

    start(w, started)
    before = datetime.now(timezone.utc)
    t = client.enqueue(q, 1)
    wait_for(lambda: client.get(t.id).last_error == "rate limited", "the task's failure")
    again = client.get(t.id)
    assert again.state == "scheduled" and again.run_at is not None
    assert again.run_at - before > timedelta(minutes=59)


def test_lease_is_kept_past_its_first_lease(client: Client, q: str, started: List[Worker]) -> None:
    release = threading.Event()
    running = threading.Event()
    w = Worker(client, lease=1000, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        running.set()
        assert release.wait(30), "the test never released the handler"

    start(w, started)
    t = client.enqueue(q, "long")
    assert running.wait(10), "the handler did not start"
    first_until = client.get(t.id).lease_until
    assert first_until is not None
    first = first_until

    def extended_twice() -> bool:
        now = client.get(t.id).lease_until
        return now is not None and now - first >= timedelta(milliseconds=600)

    # Over 600 ms beyond the first lease_until: past the first lease's end.
    wait_for(extended_twice, "the lease to be extended past its first end", timeout=15)
    assert client.get(t.id).state == "running"
    release.set()
    wait_for(lambda: state_of(client, t.id) == "succeeded", "the long task to succeed")
    done = client.get(t.id)
    assert done.attempt == 1, "the task was redelivered: its lease lapsed"
    assert w.stats.extensions >= 2 and w.stats.leases_lost == 0


def test_per_key_order_under_8_threads(client: Client, q: str, started: List[Worker]) -> None:
    keys, per_key = 6, 25
    mu = threading.Lock()
    running: Set[str] = set()
    order: Dict[str, List[int]] = defaultdict(list)
    overlaps: List[str] = []
    all_done = threading.Event()
    w = Worker(client, concurrency=8, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        key = task.key or ""
        with mu:
            if key in running:
                overlaps.append(key)
            running.add(key)
        # Give other threads the chance to break the order if they could.
        with mu:
            running.discard(key)
            order[key].append(task.payload["seq"])
            if sum(len(v) for v in order.values()) == keys * per_key:
                all_done.set()

    from chronoq import TaskSpec

    client.enqueue_many(
        TaskSpec(q, {"seq": i}, key=f"k{k}") for i in range(per_key) for k in range(keys)
    )
    start(w, started)
    assert all_done.wait(60), f"not every task ran: {sum(len(v) for v in order.values())}"
    assert overlaps == []
    for k in range(keys):
        assert order[f"k{k}"] == list(range(per_key)), f"key k{k} ran out of order"
    wait_for(lambda: w.stats.succeeded == keys * per_key, "every ack to be reported")


@pytest.mark.parametrize("prefetch", [0, 3])
def test_prefetch_claims_beyond_the_free_threads(
    client: Client, q: str, started: List[Worker], prefetch: int
) -> None:
    release = threading.Event()
    ran: List[int] = []
    w = Worker(client, concurrency=1, prefetch=prefetch, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        assert release.wait(30), "the test never released the handlers"
        ran.append(task.payload)

    from chronoq import TaskSpec

    client.enqueue_many(TaskSpec(q, i) for i in range(6))
    start(w, started)
    # One task runs, `prefetch` more are claimed (leased) and wait for the thread.
    wait_for(lambda: w.stats.claimed == 1 + prefetch, f"{1 + prefetch} tasks to be claimed")
    assert len(list(client.list(queue=q, state="running"))) == 1 + prefetch
    assert len(list(client.list(queue=q, state="scheduled"))) == 5 - prefetch
    release.set()
    wait_for(lambda: w.stats.succeeded == 6, "every task to run and be acknowledged")
    assert sorted(ran) == list(range(6))


def test_batch_handler_partial_success(client: Client, q: str, started: List[Worker]) -> None:
    batches: List[int] = []
    w = Worker(client, wait=1000)

    @w.batch_handler(q, max=1000)
    def handle(tasks: List[Lease]) -> Dict[str, Any]:
        batches.append(len(tasks))
        return {t.id: True if t.payload % 2 == 0 else ValueError(f"odd {t.payload}")
                for t in tasks if t.payload != 4}

    from chronoq import TaskSpec

    ids = [t.id for t in client.enqueue_many(TaskSpec(q, i, max_attempts=1) for i in range(10))]
    start(w, started)
    wait_for(
        lambda: all(client.get(i).state in ("succeeded", "dead") for i in ids),
        "every task of the batch to finish",
    )
    states = {client.get(i).payload: client.get(i) for i in ids}
    for n, t in states.items():
        if n % 2 == 0 and n != 4:
            assert t.state == "succeeded", n
        else:
            assert t.state == "dead", n
    assert states[3].last_error == "ValueError: odd 3"
    assert "no result" in (states[4].last_error or "")
    assert sum(batches) == 10


def test_batch_handler_list_results(client: Client, q: str, started: List[Worker]) -> None:
    w = Worker(client, wait=1000)

    def handle(tasks: List[Lease]) -> List[Any]:
        return [None if t.payload == "good" else "bad input" for t in tasks]

    w.register_batch(q, handle, max=10)
    good = client.enqueue(q, "good")
    bad = client.enqueue(q, "bad", max_attempts=1)
    start(w, started)
    wait_for(lambda: state_of(client, bad.id) == "dead", "the bad task to go dead")
    wait_for(lambda: state_of(client, good.id) == "succeeded", "the good task to succeed")
    assert client.get(bad.id).last_error == "bad input"


def test_batch_failures_ride_in_one_request(client: Client, q: str, started: List[Worker]) -> None:
    """A batch's successes and failures are reported in one request."""
    w = Worker(client, wait=1000)

    @w.batch_handler(q, max=100)
    def handle(tasks: List[Lease]) -> List[Any]:
        return [True if t.payload < 5 else RuntimeError("no") for t in tasks]

    from chronoq import TaskSpec

    ids = [t.id for t in client.enqueue_many(TaskSpec(q, i, max_attempts=1) for i in range(10))]
    start(w, started)
    wait_for(lambda: w.stats.succeeded + w.stats.failed + w.stats.refused >= 10,
             "the outcomes to be reported")
    assert w.stats.failed == 5 and w.stats.succeeded == 5
    assert w.stats.ack_requests == 1, "the batch's outcomes took more than one request"
    assert sorted(client.get(i).state for i in ids) == ["dead"] * 5 + ["succeeded"] * 5


def test_sigterm_mid_task_finishes_and_acks(server: Server, q: str, tmp_path: Path) -> None:
    client = Client(server.url)
    t = client.enqueue(q, "slow")
    env = dict(os.environ, CHRONOQ_URL=server.url, APP_DIR=str(tmp_path), APP_QUEUE=q)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT), str(Path(__file__).parent), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "chronoq", "worker", "worker_app:make_worker"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for(lambda: (tmp_path / f"started-{t.id}").exists() or proc.poll() is not None,
                 "the worker to start the task", timeout=20)
        assert proc.poll() is None, proc.communicate()[0]
        proc.send_signal(signal.SIGTERM)
        # Stopped claiming: a task enqueued now stays put (its one slot is busy).
        late = client.enqueue(q, "late")
        assert proc.poll() is None, "the worker exited before its task finished"
        (tmp_path / "release").write_text("go")
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert (tmp_path / f"done-{t.id}").exists()
    assert client.get(t.id).state == "succeeded", out
    assert client.get(late.id).state == "scheduled"
    assert not (tmp_path / f"started-{late.id}").exists()


def test_cli_rejects_a_bad_target(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "chronoq", "worker", "no_such_module_xyz:w"],
        env=env, capture_output=True, text=True, timeout=30,
    )
    assert r.returncode == 2 and "no_such_module_xyz" in r.stderr


def test_a_claim_refused_for_good_stops_the_worker(client: Client) -> None:
    w = Worker(client, wait=1000)
    w.register("bad queue name!", lambda t: None)
    from chronoq import InvalidArgument

    with pytest.raises(InvalidArgument):
        w.run(install_signal_handlers=False)


def test_stop_from_another_thread(client: Client, q: str) -> None:
    w = Worker(client, wait=500)
    ran = threading.Event()

    @w.handler(q)
    def handle(task: Lease) -> None:
        ran.set()

    client.enqueue(q, 1)
    def stopper() -> None:
        ran.wait(10)
        w.stop()

    threading.Thread(target=stopper).start()
    w.run(install_signal_handlers=False)
    assert ran.is_set() and w.stats.succeeded == 1


