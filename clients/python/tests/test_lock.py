"""Locks: the context manager (extension, loss) and the low-level calls.

Waits that run out, leases that lapse and the background extensions run on
fake time (conftest.FakeTime: chronoqd --test-clock and the client's fake
clock, moved together); no test waits for real time to pass."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chronoq import Client, LockLost, LockWaitTimeout, StaleToken
from conftest import FakeTime, InThread, wait_for


def test_low_level_acquire_extend_release_get(client: Client, q: str) -> None:
    assert not client.get_lock(q).held
    g = client.acquire_lock(q, wait=0, lease=timedelta(seconds=30), owner="me")
    assert g.key == q and g.token > 0 and g.expires_at is not None
    info = client.get_lock(q)
    assert info.held and info.owner == "me" and info.waiters == 0
    g2 = client.extend_lock(q, g.token, timedelta(minutes=5))
    assert g2.token == g.token and g2.expires_at is not None
    assert g2.expires_at - g.expires_at > timedelta(minutes=4)
    client.release_lock(q, g.token)
    assert not client.get_lock(q).held
    with pytest.raises(StaleToken):
        client.release_lock(q, g.token)
    with pytest.raises(StaleToken):
        client.extend_lock(q, g.token, 1000)


def test_context_manager_holds_and_releases(client: Client, q: str) -> None:
    with client.lock(q, wait=0, lease=60000, owner="ctx") as lk:
        assert lk.token > 0 and not lk.lost
        assert client.get_lock(q).owner == "ctx"
    assert not client.get_lock(q).held


def test_contention_with_wait_timeout(fake_time: FakeTime, q: str) -> None:
    holder, other = fake_time.client(), fake_time.client()
    with holder.lock(q, lease=60000):

        def take() -> None:
            with other.lock(q, wait=timedelta(milliseconds=7000)):
                pytest.fail("got a lock someone else holds")

        waiter = InThread(take, "the second acquisition")
        fake_time.wait_server_wait(7000, "the second acquisition")
        assert holder.get_lock(q).waiters == 1
        fake_time.advance(6999)
        assert waiter.running, "the lock wait ended before its 7 s"
        assert holder.get_lock(q).waiters == 1
        fake_time.advance(1)
        with pytest.raises(LockWaitTimeout) as ei:
            waiter.result()
        assert ei.value.field == "wait_ms"
        assert holder.get_lock(q).waiters == 0
        with pytest.raises(LockWaitTimeout):
            holder.acquire_lock(q, wait=0)
    assert not holder.get_lock(q).held


def test_the_lease_is_extended_in_the_background(fake_time: FakeTime, q: str) -> None:
    client = fake_time.client()
    with client.lock(q, lease=30000, owner="us") as lk:
        first = lk.expires_at
        assert first is not None and first == fake_time.server_now() + timedelta(seconds=30)
        # Four thirds of the lease: past the first lease's end, still ours.
        for n in range(1, 5):
            fake_time.wait_client_timer(10000, f"the lock's extension {n}")
            fake_time.advance(10000)
            wait_for(lambda: lk.extensions == n, f"the lock's extension {n} to be answered")
            info = client.get_lock(q)
            assert info.held and info.owner == "us"
            assert info.expires_at == fake_time.server_now() + timedelta(seconds=30)
            assert lk.expires_at == info.expires_at
        assert info.expires_at - first == timedelta(seconds=40)
        assert not lk.lost
    assert not client.get_lock(q).held


def test_a_lapsed_lease_frees_the_lock_and_the_token_grows(fake_time: FakeTime, q: str) -> None:
    client, other = fake_time.client(), fake_time.client()
    first = client.acquire_lock(q, wait=0, lease=5000, owner="first")
    # Waits in chronoqd (no polling) until the first lease lapses.
    taker = InThread(lambda: other.acquire_lock(q, wait=timedelta(seconds=20), lease=60000,
                                               owner="second"),
                     "the second acquisition")
    wait_for(lambda: client.get_lock(q).waiters == 1, "the second acquisition to wait")
    # chronoqd waits for the first lease's end, the sooner of the two deadlines.
    fake_time.wait_server_wait(5000, "the second acquisition")
    fake_time.advance(4999)
    assert taker.running, "the lock was handed over before the first lease lapsed"
    assert client.get_lock(q).owner == "first"
    fake_time.advance(1)
    second = taker.result()
    assert second.token > first.token
    assert client.get_lock(q).owner == "second"
    with pytest.raises(StaleToken):
        client.extend_lock(q, first.token, 1000)
    client.release_lock(q, second.token)
    third = client.acquire_lock(q, wait=0)
    assert third.token > second.token
    client.release_lock(q, third.token)


def test_lost_lease_is_reported(fake_time: FakeTime, q: str) -> None:
    client, other = fake_time.client(), fake_time.client()
    with pytest.raises(LockLost) as ei:
        with client.lock(q, lease=30000) as lk:
            # Someone takes the lock over (as if our lease had lapsed).
            other.release_lock(q, lk.token)
            taker = other.acquire_lock(q, wait=0, lease=60000, owner="taker")
            assert not lk.lost
            # The next extension (a third of the lease on) finds out.
            fake_time.wait_client_timer(10000, "the lock's extension")
            fake_time.advance(10000)
            assert lk.wait_lost(10), "the lock's loss was not noticed"
            assert lk.lost and lk.extensions == 0
            with pytest.raises(LockLost):
                lk.check()
    assert ei.value.code == "stale_token"
    info = client.get_lock(q)
    assert info.held and info.owner == "taker"  # the taker's, not released by us
    other.release_lock(q, taker.token)


def test_lost_lease_not_raised_when_asked(fake_time: FakeTime, q: str) -> None:
    client = fake_time.client()
    with client.lock(q, lease=30000, raise_if_lost=False) as lk:
        client.release_lock(q, lk.token)
        fake_time.wait_client_timer(10000, "the lock's extension")
        fake_time.advance(10000)
        assert lk.wait_lost(10), "the lock's loss was not noticed"
    assert lk.lost
