"""Pieces that need no server: times, durations, URLs, batch outcomes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from chronoq import AckItem, Client, InternalError, Lease, TaskList, Worker, error_text
from chronoq.models import format_time, parse_time, to_millis


def test_times() -> None:
    assert parse_time("2026-11-22T03:00:00.000Z") == datetime(2026, 11, 22, 3, tzinfo=timezone.utc)
    assert parse_time("2026-11-22T12:00:00.5+09:00") == datetime(
        2026, 11, 22, 3, 0, 0, 500000, tzinfo=timezone.utc)
    assert parse_time(None) is None
    aware = datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(aware, "t") == "2026-01-02T01:04:05.006000Z"
    with pytest.raises(ValueError):
        format_time(datetime(2026, 1, 1), "t")


def test_durations() -> None:
    assert to_millis(timedelta(seconds=1.5), "d") == 1500
    assert to_millis(250, "d") == 250
    with pytest.raises(TypeError):
        to_millis("10s", "d")  # type: ignore[arg-type]


def test_urls() -> None:
    c = Client("http://a:1, http://b:2/prefix/")
    assert c.urls == ["http://a:1", "http://b:2/prefix/"]
    assert c._transport.nodes[1].prefix == "/prefix"
    with pytest.raises(ValueError):
        Client("a:1")
    with pytest.raises(ValueError):
        Client([])


def test_error_text_is_the_traceback_tail() -> None:
    def inner() -> None:
        raise KeyError("missing")

    try:
        inner()
    except KeyError as e:
        text = error_text(e, lines=3)
    assert text.splitlines()[-1] == "KeyError: 'missing'" and len(text.splitlines()) == 3
    try:
        raise ValueError("x" * 10000)
    except ValueError as e:
        assert len(error_text(e).encode()) <= 4003


def test_batch_outcomes() -> None:
    w = Worker(Client("http://127.0.0.1:9"))
    leases = [Lease(id=f"t{i}", queue="q", token=9) for i in range(4)]
    out = w._batch_outcomes(leases, {"t0": True, "t1": ValueError("v"), "t2": "text"})
    assert out[0] == AckItem("t0", 9)
    assert out[1].error == "ValueError: v" and out[2].error == "text"
    assert out[3].error is not None and "no result" in out[3].error
    assert all(a.error is None for a in w._batch_outcomes(leases, None))
    wrong = w._batch_outcomes(leases, [True])
    assert all(a.error and "length 1" in a.error for a in wrong)


def test_registration_rules() -> None:
    w = Worker(Client("http://127.0.0.1:9"))
    w.register("q", lambda t: None)
    with pytest.raises(ValueError):
        w.register("q", lambda t: None)
    with pytest.raises(ValueError):
        w.register_batch("b", lambda ts: None, max=10_001)
    with pytest.raises(RuntimeError):
        Worker(Client("http://127.0.0.1:9")).start()


def test_task_list_decodes_an_answer_when_first_read() -> None:
    tasks = TaskList()
    tasks._add_answer(b'{"tasks":[{"id":"a","queue":"q","payload":1},{"id":"b","queue":"q"}]}', 2)
    tasks._add_answer(b'{"tasks":[{"id":"c","queue":"q","payload":3}]}', 1)
    tasks._add_answer(b'not json', 1)
    assert len(tasks) == 4 and repr(tasks) == "TaskList(4 tasks)"
    assert tasks[0].id == "a" and tasks[0].payload == 1 and tasks[2].id == "c"
    assert [t.id for t in tasks[0:3]] == ["a", "b", "c"] and tasks[-2].payload == 3
    assert tasks[1] is tasks[1], "a task is made once"
    with pytest.raises(InternalError, match="without its 1 tasks"):
        tasks[3]
    with pytest.raises(IndexError):
        tasks[4]
    short = TaskList()
    short._add_answer(b'{"tasks":[{"id":"a","queue":"q"}]}', 2)
    with pytest.raises(InternalError):
        short.ids
