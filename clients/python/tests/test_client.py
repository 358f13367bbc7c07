"""Every Client call against a real chronoqd."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import List

import pytest

from chronoq import (
    AckItem,
    Backoff,
    Client,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RateLimit,
    StaleToken,
    Target,
    TaskSpec,
)
from conftest import FakeTime, InThread


def test_enqueue_every_field_and_get(client: Client, q: str) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(days=3)
    t = client.enqueue(
        q, {"share": 42}, run_at=run_at, id="share:42/x y", max_attempts=7, priority=3,
        backoff=Backoff(base=2000, cap=timedelta(minutes=5)), key="customer:7",
        target=Target("http://127.0.0.1:9/hook", method="PUT", headers={"X-A": "b"},
                      timeout=1500),
    )
    assert t.id == "share:42/x y" and t.queue == q and t.payload == {"share": 42}
    assert t.state == "scheduled" and t.max_attempts == 7 and t.priority == 3
    assert t.key == "customer:7"
    assert t.run_at is not None and abs((t.run_at - run_at).total_seconds()) < 0.002
    assert t.target is not None and t.target["method"] == "PUT"
    assert t.target["timeout_ms"] == 1500
    got = client.get("share:42/x y")
    assert got == t


def test_enqueue_times_and_delays(client: Client, q: str) -> None:
    before = datetime.now(timezone.utc)
    a = client.enqueue(q, 1, delay=timedelta(hours=1))
    b = client.enqueue(q, 2, delay=3_600_000)
    c = client.enqueue(q, 3, run_at="2030-01-01T09:00:00+09:00")
    d = client.enqueue(q, 4, run_at=1893456000000)  # epoch ms
    e = client.enqueue(q)  # now, default payload
    for t in (a, b):
        assert t.run_at is not None
        assert timedelta(minutes=59) < t.run_at - before < timedelta(minutes=61)
    assert c.run_at == datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert d.run_at == datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert e.run_at is not None and e.run_at - before < timedelta(minutes=1)
    with pytest.raises(ValueError):
        client.enqueue(q, run_at=datetime(2030, 1, 1))  # naive
    with pytest.raises(ValueError):
        client.enqueue(q, run_at=before, delay=10)


def test_enqueue_on_conflict(client: Client, q: str) -> None:
    from chronoq import Conflict

    first = client.enqueue(q, {"v": 1}, id="c1", delay=60000)
    with pytest.raises(Conflict) as ei:
        client.enqueue(q, {"v": 2}, id="c1", delay=60000)
    assert ei.value.status == 409 and ei.value.field == "id"
    same = client.enqueue(q, {"v": 3}, id="c1", delay=60000, on_conflict="ignore")
    assert same.payload == {"v": 1} and same.created_at == first.created_at
    replaced = client.enqueue(q, {"v": 4}, id="c1", delay=120000, on_conflict="replace")
    assert replaced.payload == {"v": 4}
    assert client.get("c1").payload == {"v": 4}


def test_enqueue_many_in_batches(client: Client, q: str) -> None:
    specs = [TaskSpec(q, {"n": i}, id=f"b{i}", delay=60000) for i in range(25)]
    specs.append({"queue": q, "payload": {"n": 25}, "delay_ms": 60000})  # type: ignore[arg-type]
    stored = client.enqueue_many(specs, batch_size=10)
    assert [t.payload["n"] for t in stored] == list(range(26))
    assert len(list(client.list(queue=q))) == 26


def test_enqueue_many_splits_past_10000(client: Client, q: str) -> None:
    stored = client.enqueue_many(TaskSpec(q, i, delay=60000) for i in range(10_001))
    assert len(stored) == 10_001 and stored[-1].payload == 10_000
    assert client.get_queue(q).counts["scheduled"] == 10_001


def test_enqueue_many_splits_a_batch_past_the_body_limit(client: Client, q: str) -> None:
    big = "x" * 100_000  # 12 tasks: about 1.2 MB, over chronoqd's 1 MiB in one request
    stored = client.enqueue_many(TaskSpec(q, {"n": i, "pad": big}, delay=60000) for i in range(12))
    assert [t.payload["n"] for t in stored] == list(range(12))
    assert stored.ids == [t.id for t in stored]
    assert client.get_queue(q).counts["scheduled"] == 12


def test_enqueue_many_error_names_the_global_index(client: Client, q: str) -> None:
    specs: List[TaskSpec] = [TaskSpec(q, i) for i in range(15)]
    specs.append(TaskSpec(q, 15, run_at="not a time"))
    with pytest.raises(InvalidArgument) as ei:
        client.enqueue_many(specs, batch_size=10)
    assert ei.value.field == "tasks[15].run_at"
    assert "tasks[15]" in ei.value.message
    assert ei.value.stored is not None and len(ei.value.stored) == 10


def test_cancel(client: Client, q: str) -> None:
    client.enqueue(q, id="cx", delay=60000)
    t = client.cancel("cx")
    assert t.state == "cancelled"
    with pytest.raises(FailedPrecondition):
        client.cancel("cx")
    with pytest.raises(NotFound):
        client.cancel("no-such-task-" + q)


def test_reschedule(client: Client, q: str) -> None:
    client.enqueue(q, {"a": 1}, id="rs", delay=60000)
    t = client.reschedule("rs", run_at="2031-05-05T00:00:00Z", payload={"a": 2})
    assert t.run_at == datetime(2031, 5, 5, tzinfo=timezone.utc) and t.payload == {"a": 2}
    t = client.reschedule("rs", delay=timedelta(hours=2))
    assert t.payload == {"a": 2}  # left out: kept
    with pytest.raises(ValueError):
        client.reschedule("rs")


def test_retry_a_dead_task(client: Client, q: str) -> None:
    client.enqueue(q, id="dead1", max_attempts=1)
    lease = client.claim(q).tasks[0]
    client.fail(lease.id, lease.token, "gave up")
    dead = client.get("dead1")
    assert dead.state == "dead" and dead.last_error == "gave up"
    again = client.retry("dead1")
    assert again.state == "scheduled" and again.attempt == 0
    with pytest.raises(FailedPrecondition):
        client.retry("dead1")


def test_list_pages_and_filters(client: Client, q: str) -> None:
    for i in range(7):
        client.enqueue(q, i, key="k1" if i % 2 else "k2", delay=60000)
    page = client.list_page(queue=q, limit=3)
    assert len(page.items) == 3 and page.next_cursor
    rest = client.list_page(queue=q, limit=3, cursor=page.next_cursor)
    assert {t.id for t in rest.items}.isdisjoint({t.id for t in page.items})
    everything = list(client.list(queue=q, page_size=3))
    assert sorted(t.payload for t in everything) == list(range(7))
    assert sorted(t.payload for t in client.list(queue=q, key="k1")) == [1, 3, 5]
    assert list(client.list(queue=q, state="running")) == []


def test_claim_extend_ack(client: Client, q: str) -> None:
    client.enqueue(q, {"x": 1}, id="w1", key="kk")
    claimed = client.claim(q, max=10, lease=timedelta(seconds=5))
    assert len(claimed) == 1
    lease = claimed.tasks[0]
    assert lease.id == "w1" and lease.token > 0 and lease.attempt == 1 and lease.key == "kk"
    assert lease.lease_until is not None
    until = client.extend(lease.id, lease.token, timedelta(minutes=10))
    assert until - lease.lease_until > timedelta(minutes=9)
    client.ack(lease.id, lease.token)
    assert client.get("w1").state == "succeeded"
    with pytest.raises(StaleToken) as ei:
        client.ack(lease.id, lease.token)
    assert ei.value.status == 409


def test_fail_with_retry_in(client: Client, q: str) -> None:
    client.enqueue(q, id="f1")
    lease = client.claim(q).tasks[0]
    before = datetime.now(timezone.utc)
    client.fail(lease.id, lease.token, "smtp: 421", retry_in=timedelta(hours=1))
    t = client.get("f1")
    assert t.state == "scheduled" and t.last_error == "smtp: 421"
    assert t.run_at is not None and t.run_at - before > timedelta(minutes=59)
    with pytest.raises(StaleToken):
        client.fail(lease.id, lease.token, "again")
    with pytest.raises(StaleToken):
        client.extend(lease.id, lease.token, 1000)


def test_claim_long_poll(fake_time: FakeTime, q: str) -> None:
    client = fake_time.client()
    claim = InThread(lambda: client.claim(q, wait=timedelta(seconds=20)), "the long poll")
    fake_time.wait_server_wait(20000, "the claim")
    # Due in 300 ms (of the test clock), while the claim waits in chronoqd.
    t = client.enqueue(q, "wake up", delay=300)
    assert t.run_at == fake_time.server_now() + timedelta(milliseconds=300)
    fake_time.advance(289)
    assert client.get(t.id).state == "scheduled", "the task was taken too early"
    # chronoqd takes it for the waiting claim 10 ms ahead (claim_ahead), so
    # that its lease is committed by the due time, and answers at the due time.
    fake_time.advance(10)
    assert client.get(t.id).state == "running"
    assert claim.running, "the task was handed out before it was due"
    fake_time.advance(1)
    got = claim.result()
    assert [x.payload for x in got] == ["wake up"]
    assert client.get(t.id).state == "running"
    # Nothing comes: the claim answers empty once its wait has run out.
    claim = InThread(lambda: client.claim(q, wait=50), "the empty long poll")
    fake_time.wait_server_wait(50, "the claim")
    fake_time.advance(49)
    assert fake_time.server_waiting(1), "the claim stopped waiting before its wait ran out"
    fake_time.advance(1)
    empty = claim.result()
    assert len(empty) == 0 and not empty
    client.ack(got.tasks[0].id, got.tasks[0].token)


def test_claim_carries_acks(client: Client, q: str) -> None:
    client.enqueue(q, 1, key="same")
    client.enqueue(q, 2, key="same")
    first = client.claim(q, max=10)
    assert [t.payload for t in first] == [1]  # the key's next one waits
    second = client.claim(q, max=10, acks=[first.tasks[0]])
    assert [(r.id, r.ok) for r in second.acks] == [(first.tasks[0].id, True)]
    assert [t.payload for t in second] == [2]  # freed by the ack it carried
    stale = client.claim(q, acks=[(first.tasks[0].id, first.tasks[0].token)])
    assert not stale.acks[0].ok and isinstance(stale.acks[0].error, StaleToken)
    client.ack_many([second.tasks[0]])


def test_get_with_attempts_shows_the_history(client: Client, q: str) -> None:
    client.enqueue(q, 1, id=q + "-a1", max_attempts=2)
    lease = client.claim(q, worker="host-a:1").tasks[0]
    client.fail(lease.id, lease.token, "smtp: 451", retry_in=0)
    assert client.get(lease.id).attempts is None  # not asked for
    [a] = client.get(lease.id, attempts=True).attempts
    assert (a.attempt, a.outcome, a.worker, a.error, a.response) == (
        1, "failed", "host-a:1", "smtp: 451", None)
    assert a.started_at is not None and a.ended_at is not None and a.duration_ms >= 0
    assert a.node is None  # the test's chronoqd has no --node-id


def test_claim_names_the_worker(client: Client, q: str) -> None:
    client.enqueue(q, 1, id=q + "-w1")
    client.enqueue(q, 2, id=q + "-w2")
    assert client.get(q + "-w1").worker is None
    lease = client.claim(q, worker="host-a:4242").tasks[0]
    assert client.get(lease.id).worker == "host-a:4242"  # the lease holder
    client.ack(lease.id, lease.token)
    assert client.get(lease.id).worker == "host-a:4242"  # kept after the lease ends
    anonymous = client.claim(q, worker="").tasks[0]  # "" names nobody
    assert client.get(anonymous.id).worker is None
    client.ack(anonymous.id, anonymous.token)
    for bad in ("two\nlines", "x" * 201):
        with pytest.raises(InvalidArgument) as ei:
            client.claim(q, worker=bad)
        assert ei.value.status == 400 and ei.value.field == "worker"


def test_ack_many_successes(client: Client, q: str) -> None:
    for i in range(3):
        client.enqueue(q, i)
    leases = client.claim(q, max=3).tasks
    results = client.ack_many([leases[0], (leases[1].id, leases[1].token), AckItem(leases[2].id,
                                                                              leases[2].token)])
    assert [r.ok for r in results] == [True, True, True]
    again = client.ack_many(leases[:1])
    assert not again[0].ok and isinstance(again[0].error, StaleToken)
    assert again[0].error.code == "stale_token"


def test_ack_many_with_failures(client: Client, q: str) -> None:
    """Needs chronoqd's acks with failures ({id, token, error, retry_in_ms})."""
    client.enqueue(q, id=q + "-ok")
    client.enqueue(q, id=q + "-bad")
    leases = {t.id: t for t in client.claim(q, max=2)}
    results = client.ack_many([
        leases[q + "-ok"],
        AckItem(q + "-bad", leases[q + "-bad"].token, error="broke", retry_in=timedelta(hours=1)),
    ])
    assert [r.ok for r in results] == [True, True]
    assert client.get(q + "-ok").state == "succeeded"
    bad = client.get(q + "-bad")
    assert bad.state == "scheduled" and bad.last_error == "broke"


def test_claim_carries_failures(client: Client, q: str) -> None:
    """Needs chronoqd's acks with failures on a claim."""
    client.enqueue(q, id=q + "-1", max_attempts=1)
    lease = client.claim(q).tasks[0]
    answer = client.claim(q, acks=[AckItem(lease.id, lease.token, error="nope")])
    assert [(r.id, r.ok) for r in answer.acks] == [(lease.id, True)]
    t = client.get(lease.id)
    assert t.state == "dead" and t.last_error == "nope"


def test_ack_item_retry_in_needs_error() -> None:
    with pytest.raises(ValueError):
        AckItem("a", 1, retry_in=5).to_json()


def test_queues_configure_get_list(client: Client, q: str) -> None:
    info = client.configure_queue(
        q, concurrency=8, max_in_flight_per_key=2, max_pending_per_key=100, max_attempts=5,
        backoff=Backoff(1000, 60000), retention=timedelta(hours=1),
        rate_limit=RateLimit(100, timedelta(seconds=1)),
    )
    assert info.name == q and info.concurrency == 8 and info.max_in_flight == 8
    assert info.max_in_flight_per_key == 2 and info.max_pending_per_key == 100
    assert info.max_attempts == 5 and info.retention_ms == 3_600_000
    assert info.backoff == {"base_ms": 1000, "cap_ms": 60000}
    assert info.rate_limit == {"count": 100, "period_ms": 1000}
    reset = client.configure_queue(q, rate_limit=None, max_pending_per_key=None)
    assert reset.rate_limit is None and reset.max_pending_per_key is None
    assert reset.concurrency == 8  # left out: kept
    assert client.get_queue(q).max_attempts == 5
    assert q in {x.name for x in client.list_queues()}


def test_pause_and_resume_queue(client: Client, q: str) -> None:
    client.enqueue(q, "p")
    assert client.pause_queue(q).paused
    assert len(client.claim(q)) == 0
    assert client.get_queue(q).paused
    assert not client.resume_queue(q).paused
    assert [t.payload for t in client.claim(q)] == ["p"]


def test_schedules(client: Client, q: str) -> None:
    from chronoq import Conflict

    name = "s-" + q
    s = client.create_schedule(
        name, q, cron="0 0 3 * * *", tz="Asia/Seoul", payload={"days": 30}, misfire="skip",
        overlap="allow", priority=2, max_attempts=4,
    )
    assert s.name == name and s.cron == "0 0 3 * * *" and s.tz == "Asia/Seoul"
    assert s.payload == {"days": 30} and s.next_run is not None and not s.paused
    with pytest.raises(Conflict):
        client.create_schedule(name, q, every=60000)
    assert client.get_schedule(name).priority == 2
    nxt = client.next_occurrences(name, 3)
    assert len(nxt) == 3 and nxt[0] < nxt[1] < nxt[2]
    assert all(t.hour == 18 for t in nxt)  # 03:00 in Seoul
    other = client.create_schedule("t-" + q, q, every=timedelta(minutes=1),
                                   start="2030-01-01T00:00:00Z")
    assert other.every_ms == 60000
    names = [x.name for x in client.list_schedules(queue=q, page_size=1)]
    assert names == sorted([name, "t-" + q])
    assert client.pause_schedule(name).paused
    assert not client.resume_schedule(name).paused
    put = client.put_schedule(name, q, fixed_delay=timedelta(minutes=5))
    assert put.fixed_delay_ms == 300000 and put.cron is None
    client.delete_schedule(name)
    with pytest.raises(NotFound):
        client.get_schedule(name)
    with pytest.raises(NotFound):
        client.delete_schedule(name)


def test_health_version_cluster(client: Client) -> None:
    assert client.health()["status"] == "ok"
    assert client.version().count(".") == 2
    # A single-node chronoqd has no cluster endpoint.
    with pytest.raises(NotFound):
        client.cluster()


def test_low_level_request(client: Client) -> None:
    assert client.request("GET", "/v1/version")["version"] == client.version()
