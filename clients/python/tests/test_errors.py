"""Every error class: raised from real chronoqd answers where one can be
provoked, from a fake node for the cluster's codes, and the code table."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Type

import pytest

import chronoq
from chronoq import (
    ChronoqError,
    Client,
    Conflict,
    ConnectionFailed,
    FailedPrecondition,
    InternalError,
    InvalidArgument,
    KeyBacklogFull,
    LeaderTimeout,
    LeaderUnavailable,
    LockWaitTimeout,
    MethodNotAllowed,
    NotFound,
    NotLeader,
    OutcomeUnknown,
    PayloadTooLarge,
    RequestHeaderFieldsTooLarge,
    StaleToken,
    StoreUnavailable,
    Unauthorized,
    Unavailable,
    error_from_json,
)
from conftest import FakeNode, Server, closed_port_url, error_body, wait_for


def test_invalid_argument_names_the_field(client: Client, q: str) -> None:
    with pytest.raises(InvalidArgument) as ei:
        client.enqueue(q, run_at="next tuesday")
    e = ei.value
    assert (e.status, e.code, e.field) == (400, "invalid_argument", "run_at")
    assert "run_at" in e.message and "field run_at" in str(e)


def test_not_found(client: Client) -> None:
    with pytest.raises(NotFound) as ei:
        client.get("no-such-task")
    assert ei.value.status == 404 and ei.value.code == "not_found"


def test_conflict(client: Client, q: str) -> None:
    client.enqueue(q, id=q, delay=60000)
    with pytest.raises(Conflict) as ei:
        client.enqueue(q, id=q, delay=60000)
    assert (ei.value.status, ei.value.code, ei.value.field) == (409, "conflict", "id")


def test_failed_precondition(client: Client, q: str) -> None:
    client.enqueue(q, id=q)
    client.claim(q)
    with pytest.raises(FailedPrecondition) as ei:
        client.cancel(q)
    assert ei.value.status == 409 and ei.value.code == "failed_precondition"


def test_stale_token(client: Client, q: str) -> None:
    client.enqueue(q, id=q)
    lease = client.claim(q).tasks[0]
    with pytest.raises(StaleToken) as ei:
        client.ack(lease.id, lease.token + 1000)
    assert (ei.value.status, ei.value.code, ei.value.field) == (409, "stale_token", "token")


def test_lock_wait_timeout(client: Client, q: str) -> None:
    grant = client.acquire_lock(q, wait=0, lease=60000)
    with pytest.raises(LockWaitTimeout) as ei:
        client.acquire_lock(q, wait=0)
    assert (ei.value.status, ei.value.field) == (409, "wait_ms")
    client.release_lock(q, grant.token)


def test_key_backlog_full(client: Client, q: str) -> None:
    client.configure_queue(q, max_pending_per_key=1)
    client.enqueue(q, key="busy", delay=60000)
    with pytest.raises(KeyBacklogFull) as ei:
        client.enqueue(q, key="busy", delay=60000)
    assert (ei.value.status, ei.value.code, ei.value.field) == (429, "key_backlog_full", "key")
    assert "busy" in ei.value.message
    with pytest.raises(KeyBacklogFull) as eb:
        client.enqueue_many([chronoq.TaskSpec(q, 1), chronoq.TaskSpec(q, 2, key="busy")])
    assert eb.value.field == "tasks[1].key"


def test_method_not_allowed(client: Client) -> None:
    with pytest.raises(MethodNotAllowed) as ei:
        client.request("PUT", "/v1/version", {})
    assert ei.value.status == 405


def test_payload_too_large(client: Client, q: str) -> None:
    with pytest.raises(PayloadTooLarge) as ei:
        client.enqueue(q, "x" * (1 << 20))
    assert ei.value.status == 413


def test_request_header_fields_too_large(client: Client) -> None:
    with pytest.raises(RequestHeaderFieldsTooLarge) as ei:
        client.get("x" * 20000)
    assert ei.value.status == 431


def test_unauthorized() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as data:
        s = Server(data, token="sekrit")
        try:
            with pytest.raises(Unauthorized) as ei:
                Client(s.url, token="wrong").version()
            assert ei.value.status == 401
            with pytest.raises(Unauthorized):
                Client(s.url, token="").version()
            assert Client(s.url, token="sekrit").version()
            assert Client(s.url).health()["status"] == "ok"  # /healthz needs none
        finally:
            s.stop()


def test_unavailable_while_chronoqd_stops(own_server: Server) -> None:
    c = Client(own_server.url, timeout=20)
    grant = c.acquire_lock("held", lease=60000)
    assert grant.token > 0
    errors: List[BaseException] = []

    def waiter() -> None:
        try:
            Client(own_server.url, timeout=20).acquire_lock("held", wait=60000)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    wait_for(lambda: c.get_lock("held").waiters == 1, "the second acquisition to wait")
    own_server.stop()
    t.join(20)
    assert not t.is_alive(), "the waiting acquisition did not end when chronoqd stopped"
    assert len(errors) == 1 and isinstance(errors[0], Unavailable), errors
    assert errors[0].status == 503 and errors[0].code == "unavailable"


def test_connection_failed() -> None:
    with pytest.raises(ConnectionFailed) as ei:
        Client(closed_port_url(), timeout=5).version()
    e = ei.value
    assert isinstance(e, Unavailable) and e.status is None and "refused" in e.message


@pytest.mark.parametrize(
    "status,code,cls",
    [
        (503, "not_leader", NotLeader),
        (503, "leader_unavailable", LeaderUnavailable),
        (503, "store_unavailable", StoreUnavailable),
        (503, "unavailable", Unavailable),
        (504, "leader_timeout", LeaderTimeout),
        (500, "internal", InternalError),
        (500, "data_loss", InternalError),
    ],
)
def test_server_error_codes_from_a_node(
    fake_node: Callable[..., FakeNode], status: int, code: str, cls: Type[ChronoqError]
) -> None:
    node = fake_node(lambda m, p, b: (status, error_body(code, "said so")))
    with pytest.raises(cls) as ei:
        Client(node.url, timeout=5).enqueue("q", 1)
    assert (ei.value.status, ei.value.code, ei.value.message) == (status, code, "said so")
    if code == "leader_timeout":
        assert isinstance(ei.value, OutcomeUnknown)


def test_outcome_unknown(fake_node: Callable[..., FakeNode]) -> None:
    node = fake_node(lambda m, p, b: None)  # reads the request, never answers
    with pytest.raises(OutcomeUnknown) as ei:
        Client(node.url, timeout=5).enqueue("q", 1)
    assert ei.value.status is None and "may or may not" in ei.value.message


def test_a_non_json_error_page(fake_node: Callable[..., FakeNode]) -> None:
    node = fake_node(lambda m, p, b: (502, "bad gateway"))
    with pytest.raises(ChronoqError) as ei:
        Client(node.url, timeout=5).version()
    assert ei.value.status == 502


ERROR_TABLE = [
    (400, "invalid_argument", InvalidArgument),
    (401, "unauthorized", Unauthorized),
    (404, "not_found", NotFound),
    (405, "method_not_allowed", MethodNotAllowed),
    (409, "conflict", Conflict),
    (409, "stale_token", StaleToken),
    (409, "failed_precondition", FailedPrecondition),
    (409, "lock_wait_timeout", LockWaitTimeout),
    (413, "payload_too_large", PayloadTooLarge),
    (429, "key_backlog_full", KeyBacklogFull),
    (431, "request_header_fields_too_large", RequestHeaderFieldsTooLarge),
    (503, "unavailable", Unavailable),
    (503, "not_leader", NotLeader),
    (503, "leader_unavailable", LeaderUnavailable),
    (504, "leader_timeout", LeaderTimeout),
    (503, "store_unavailable", StoreUnavailable),
]


@pytest.mark.parametrize("status,code,cls", ERROR_TABLE)
def test_error_table_maps_each_code(status: int, code: str, cls: Type[ChronoqError]) -> None:
    e = error_from_json({"code": code, "message": "m", "field": "f"}, status, "http://n")
    assert type(e) is cls
    assert (e.code, e.message, e.field, e.status, e.node) == (code, "m", "f", status, "http://n")
    assert isinstance(e, ChronoqError)


def test_unknown_codes_fall_back_on_the_status() -> None:
    assert type(error_from_json({"code": "brand_new", "message": "m"}, 404)) is NotFound
    assert type(error_from_json({"code": "brand_new"}, 503)) is Unavailable
    assert type(error_from_json(None, 500)) is InternalError
    e: Any = error_from_json("garbage", None)
    assert type(e) is ChronoqError


def test_errors_are_exported() -> None:
    missing: Optional[str] = next(
        (name for name in ("LockLost", "OutcomeUnknown", "ConnectionFailed") if
         not hasattr(chronoq, name)), None)
    assert missing is None
