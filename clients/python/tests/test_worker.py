"""The Worker against a real chronoqd.

Tests of leases, extensions and stopping run on fake time (conftest.FakeTime:
chronoqd --test-clock and the client's fake clock, moved together). The
others only process tasks: their long-poll claims return as soon as a task
comes, so they run on the chronoqd that keeps real time and wait for events
(a task acknowledged, a counter reached), never for time to pass."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set

import pytest

import chronoq.worker as worker_mod
from chronoq import Client, Lease, RetryLater, Worker
from conftest import PACKAGE_ROOT, FakeTime, InThread, Server, wait_for


@pytest.fixture()
def client(fake_time: FakeTime) -> Client:
    """A client of the test-clock chronoqd on the fake clock: every worker
    here runs on fake time."""
    return fake_time.client()


@pytest.fixture()
def started(fake_time: FakeTime) -> Iterator[List[Worker]]:
    """Workers started in the test; stopped at the end whatever happens
    (moving time past the wait of their claims in flight)."""
    workers: List[Worker] = []
    yield workers
    for w in workers:
        stop_on_fake_time(w, fake_time)


def start(worker: Worker, started: List[Worker]) -> Worker:
    worker.start()
    started.append(worker)
    return worker


def state_of(client: Client, id: str) -> str:
    return client.get(id).state


def test_handler_success(
    client: Client, fake_time: FakeTime, q: str, started: List[Worker]
) -> None:
    seen: List[Any] = []
    w = Worker(client, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        seen.append(task.payload)

    start(w, started)
    t = client.enqueue(q, {"n": 1})
    wait_for(lambda: state_of(client, t.id) == "succeeded", "the task to succeed")
    assert seen == [{"n": 1}]
    # The ack rode on a claim, which answers (and the worker counts the ack's
    # result) once its wait has run out.
    fake_time.run_out_until(lambda: w.stats.succeeded == 1, 1000,
                            "the worker to count the ack's result")
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


def test_retry_later_chooses_the_delay(
    client: Client, fake_time: FakeTime, q: str, started: List[Worker]
) -> None:
    w = Worker(client, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        raise RetryLater("rate limited", delay=timedelta(hours=1))

    start(w, started)
    t = client.enqueue(q, 1)
    wait_for(lambda: client.get(t.id).last_error == "rate limited", "the task's failure")
    again = client.get(t.id)
    assert again.state == "scheduled"
    assert again.run_at == fake_time.server_now() + timedelta(hours=1)


def stop_on_fake_time(w: Worker, fake_time: FakeTime) -> None:
    """Stops a worker of the test-clock chronoqd: its stop waits for the
    claim in flight, whose long poll ends only when time moves past it."""
    w.stop()
    stopping = InThread(lambda: w.shutdown(flush_timeout=5), "the worker's shutdown")
    fake_time.run_out_until(lambda: not stopping.running, w.wait_ms,
                            "the worker to stop (its claim's wait run out)")
    stopping.result()


def test_lease_is_kept_past_its_first_lease(fake_time: FakeTime, q: str) -> None:
    client = fake_time.client()
    release = threading.Event()
    running = threading.Event()
    w = Worker(client, lease=30000, wait=1000)

    @w.handler(q)
    def handle(task: Lease) -> None:
        running.set()
        assert release.wait(30), "the test never released the handler"

    t = client.enqueue(q, "long")
    w.start()
    try:
        assert running.wait(10), "the handler did not start"
        first = client.get(t.id).lease_until
        assert first == fake_time.server_now() + timedelta(seconds=30)
        # Every third of the lease (10 s on the fake clocks) the lease is
        # extended to a full lease from then: four times, past the first end.
        for n in range(1, 5):
            fake_time.wait_client_timer(10000, f"the lease's extension {n}")
            fake_time.advance(10000)
            wait_for(lambda: w.stats.extensions == n, f"the lease's extension {n} to be answered")
            task = client.get(t.id)
            assert task.state == "running" and task.attempt == 1
            assert task.lease_until == fake_time.server_now() + timedelta(seconds=30)
        assert task.lease_until is not None and task.lease_until - first == timedelta(seconds=40)
        release.set()
        wait_for(lambda: state_of(client, t.id) == "succeeded", "the long task to succeed")
    finally:
        release.set()
        stop_on_fake_time(w, fake_time)
    done = client.get(t.id)
    assert done.attempt == 1, "the task was redelivered: its lease lapsed"
    assert w.stats.extensions == 4 and w.stats.leases_lost == 0
    assert w.stats.succeeded == 1 and w.stats.refused == 0


def test_per_key_order_under_8_threads(
    client: Client, fake_time: FakeTime, q: str, started: List[Worker]
) -> None:
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
    fake_time.run_out_until(lambda: w.stats.succeeded == keys * per_key, 1000,
                            "every ack to be reported")


@pytest.mark.parametrize("prefetch", [0, 3])
def test_prefetch_claims_beyond_the_free_threads(
    client: Client, fake_time: FakeTime, q: str, started: List[Worker], prefetch: int
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
    fake_time.run_out_until(lambda: w.stats.succeeded == 6, 1000,
                            "every task to run and be acknowledged")
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


def test_batch_failures_ride_in_one_request(
    client: Client, fake_time: FakeTime, q: str, started: List[Worker]
) -> None:
    """A batch's successes and failures are reported in one request."""
    w = Worker(client, wait=1000)

    @w.batch_handler(q, max=100)
    def handle(tasks: List[Lease]) -> List[Any]:
        return [True if t.payload < 5 else RuntimeError("no") for t in tasks]

    from chronoq import TaskSpec

    ids = [t.id for t in client.enqueue_many(TaskSpec(q, i, max_attempts=1) for i in range(10))]
    start(w, started)
    fake_time.run_out_until(lambda: w.stats.succeeded + w.stats.failed + w.stats.refused >= 10,
                            1000, "the outcomes to be reported")
    assert w.stats.failed == 5 and w.stats.succeeded == 5
    assert w.stats.ack_requests == 1, "the batch's outcomes took more than one request"
    assert sorted(client.get(i).state for i in ids) == ["dead"] * 5 + ["succeeded"] * 5


def test_sigterm_mid_task_finishes_and_acks(tc_server: Server, q: str, tmp_path: Path) -> None:
    # On the test clock, so the task's lease cannot lapse however long the
    # test takes; with no prefetch no claim is in flight once the task runs,
    # so the stop waits for no claim's wait.
    server = tc_server
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


def test_stop_from_another_thread(fake_time: FakeTime, q: str) -> None:
    client = fake_time.client()
    w = Worker(client, wait=5000)
    ran = threading.Event()

    @w.handler(q)
    def handle(task: Lease) -> None:
        ran.set()

    client.enqueue(q, 1)
    running = InThread(lambda: w.run(install_signal_handlers=False), "Worker.run")
    assert ran.wait(10), "the handler did not run"
    w.stop()
    # The claim in flight (it carries the task's ack) returns when its 5 s
    # wait runs out; then run() returns.
    fake_time.run_out_until(lambda: not running.running, 5000, "Worker.run to return")
    running.result()
    assert w.stats.succeeded == 1
