"""Several URLs: moving to the next node on connection failures and 503s, and
never resending a POST whose answer was lost unless it is safe."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

import pytest

from chronoq import Client, ChronoqError, ConnectionFailed, NotLeader, OutcomeUnknown
from conftest import FakeNode, Server, closed_port_url, error_body, wait_for

# The PostgreSQL cluster ctest starts for the tests (a file holding its conninfo).
PG_CONNINFO_FILE = os.environ.get("CHRONOQ_TEST_PG", "")


def test_first_node_down(server: Server, q: str) -> None:
    down = closed_port_url()
    c = Client([down, server.url], timeout=5)
    t = c.enqueue(q, 1)
    assert c.get(t.id).id == t.id
    assert c.current_url == server.url  # the node that answered stays current
    assert c.claim(q).tasks[0].id == t.id


def test_urls_as_a_comma_separated_string(server: Server, monkeypatch: Any) -> None:
    monkeypatch.setenv("CHRONOQ_URL", f"{closed_port_url()}, {server.url}")
    c = Client(timeout=5)
    assert len(c.urls) == 2 and c.version()


def test_every_node_down() -> None:
    a, b = closed_port_url(), closed_port_url()
    with pytest.raises(ConnectionFailed) as ei:
        Client([a, b], timeout=5).version()
    assert "no node answered" in ei.value.message
    assert a in ei.value.message and b in ei.value.message


def test_503_moves_to_the_next_node(
    server: Server, q: str, fake_node: Callable[..., FakeNode]
) -> None:
    standby = fake_node(lambda m, p, b: (503, error_body("not_leader", "no leader")))
    c = Client([standby.url, server.url], timeout=5)
    t = c.enqueue(q, "x")  # a POST without id: a 503 means not done, so it moves on
    assert c.get(t.id).payload == "x"
    assert len(standby.requests) == 1 and c.current_url == server.url


def test_every_node_503(fake_node: Callable[..., FakeNode]) -> None:
    a = fake_node(lambda m, p, b: (503, error_body("not_leader", "a says no")))
    b = fake_node(lambda m, p, b: (503, error_body("leader_unavailable", "b says no")))
    with pytest.raises(Exception) as ei:
        Client([a.url, b.url], timeout=5).version()
    assert ei.value.__class__.__name__ == "LeaderUnavailable"
    assert "a says no" in str(ei.value) and "b says no" in str(ei.value)
    with pytest.raises(NotLeader):
        Client([a.url], timeout=5).version()


def _dropper(m: str, p: str, b: Any) -> Optional[Tuple[int, Any]]:
    return None


def test_lost_answer_of_a_create_without_id_is_not_resent(
    server: Server, q: str, fake_node: Callable[..., FakeNode]
) -> None:
    lossy = fake_node(_dropper)
    c = Client([lossy.url, server.url], timeout=5)
    with pytest.raises(OutcomeUnknown) as ei:
        c.enqueue(q, "maybe")
    assert ei.value.node == lossy.url
    assert list(Client(server.url).list(queue=q)) == []  # not sent to the second node


def test_lost_answer_of_a_safe_call_is_resent(
    server: Server, q: str, fake_node: Callable[..., FakeNode]
) -> None:
    lossy = fake_node(_dropper)
    c = Client([lossy.url, server.url], timeout=5)
    t = c.enqueue(q, "with id", id=q + "-1")  # a client id makes it safe
    assert t.id == q + "-1"
    c2 = Client([lossy.url, server.url], timeout=5)
    assert c2.get(t.id).payload == "with id"  # GET
    lease = Client([lossy.url, server.url], timeout=5).claim(q).tasks[0]  # claim
    Client([lossy.url, server.url], timeout=5).ack(lease.id, lease.token)  # token
    assert Client(server.url).get(t.id).state == "succeeded"
    assert [r[0] for r in lossy.requests] == ["POST", "GET", "POST", "POST"]


def test_lock_acquire_is_not_resent(
    server: Server, q: str, fake_node: Callable[..., FakeNode]
) -> None:
    lossy = fake_node(_dropper)
    with pytest.raises(OutcomeUnknown):
        Client([lossy.url, server.url], timeout=5).acquire_lock(q, wait=0)
    assert not Client(server.url).get_lock(q).held


def test_keep_alive_survives_an_idle_close(server: Server) -> None:
    # The client notices a connection the server closed and opens another.
    c = Client(server.url, timeout=5)
    assert c.version()
    conns = c._transport._local.conns
    conn = next(iter(conns.values()))
    assert conn.sock is not None
    import socket as socket_mod

    conn.sock.shutdown(socket_mod.SHUT_RDWR)  # as if the server had closed it
    assert c.enqueue("keepalive-" + str(id(c)), 1).state == "scheduled"


def _leader_of(c: Client) -> str:
    """The node id of the leader c's current node sees ("" for none yet, or no answer)."""
    try:
        leader = c.cluster().get("leader") or {}
    except ChronoqError:
        return ""
    return str(leader.get("node_id", ""))


@pytest.mark.skipif(
    not PG_CONNINFO_FILE,
    reason="CHRONOQ_TEST_PG is not set: ctest sets it to the PostgreSQL cluster it starts",
)
def test_cluster_failover(tmp_path: Path, q: str) -> None:
    """C13 with a real cluster: two chronoqd --cluster nodes on PostgreSQL.
    cluster() names the leader and both nodes; a client given both URLs goes
    on through the other node once the leader is killed (SIGKILL), and what it
    stored before is there."""
    conninfo = Path(PG_CONNINFO_FILE).read_text().strip()
    store = f"{conninfo} schema=py_cluster_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    def node(node_id: str) -> Server:
        # Replaced quickly when it dies: heartbeats every 100 ms, a 1 s lease.
        return Server(str(tmp_path / node_id), extra=["--cluster", "--store", store, "--node-id",
                                                      node_id, "--heartbeat-ms", "100",
                                                      "--lease-ms", "1000"])

    n1 = node("n1")
    try:
        wait_for(lambda: _leader_of(Client(n1.url, timeout=5)) == "n1", "n1 to lead")
        n2 = node("n2")
        try:
            c = Client([n1.url, n2.url], timeout=5)

            def both_listed() -> bool:
                info = c.cluster()
                return (info["node"] == "n1" and info["role"] == "leader"
                        and len(info["nodes"]) == 2)

            wait_for(both_listed, "cluster() to list n1 and n2")
            before = c.enqueue(q, {"n": 1}, id="before")
            n1.kill()
            # n2 leads once n1's session (or its 1 s lease) is gone; until then
            # calls fail over or answer 503.
            wait_for(lambda: _leader_of(c) == "n2", "n2 to lead")
            assert c.current_url == n2.url
            t = c.get(before.id)
            assert t.state == "scheduled" and t.payload == {"n": 1}
            c.enqueue(q, id="after")
            assert len(c.claim(q, max=10, lease=60).tasks) == 2
        finally:
            n2.stop()
    finally:
        n1.stop()
