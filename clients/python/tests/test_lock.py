"""Locks: the context manager (extension, loss) and the low-level calls."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chronoq import Client, LockLost, LockWaitTimeout, StaleToken
from conftest import wait_for


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


def test_contention_with_wait_timeout(client: Client, q: str) -> None:
    with client.lock(q, lease=60000):
        with pytest.raises(LockWaitTimeout) as ei:
            with Client(client.urls).lock(q, wait=timedelta(milliseconds=200)):
                pytest.fail("got a lock someone else holds")
        assert ei.value.field == "wait_ms"
        with pytest.raises(LockWaitTimeout):
            client.acquire_lock(q, wait=0)


def test_the_lease_is_extended_in_the_background(client: Client, q: str) -> None:
    with client.lock(q, lease=600) as lk:
        first = lk.expires_at
        assert first is not None
        wait_for(lambda: lk.extensions >= 3, "three background extensions of a 600 ms lease")
        info = client.get_lock(q)
        assert info.held and info.expires_at is not None and info.expires_at > first
        # Past several leases, still ours.
        assert not lk.lost
    assert not client.get_lock(q).held


def test_a_lapsed_lease_frees_the_lock_and_the_token_grows(client: Client, q: str) -> None:
    first = client.acquire_lock(q, wait=0, lease=200)
    # Waits in chronoqd (no polling) until the first lease lapses.
    second = Client(client.urls).acquire_lock(q, wait=timedelta(seconds=20), lease=60000)
    assert second.token > first.token
    with pytest.raises(StaleToken):
        client.extend_lock(q, first.token, 1000)
    client.release_lock(q, second.token)
    third = client.acquire_lock(q, wait=0)
    assert third.token > second.token
    client.release_lock(q, third.token)


def test_lost_lease_is_reported(client: Client, q: str) -> None:
    other = Client(client.urls)
    with pytest.raises(LockLost) as ei:
        with client.lock(q, lease=600) as lk:
            # Someone takes the lock over (as if our lease had lapsed).
            other.release_lock(q, lk.token)
            taker = other.acquire_lock(q, wait=0, lease=60000)
            assert lk.wait_lost(10), "the lock's loss was not noticed"
            assert lk.lost
            with pytest.raises(LockLost):
                lk.check()
    assert ei.value.code == "stale_token"
    assert client.get_lock(q).held  # the taker's, not released by us
    other.release_lock(q, taker.token)


def test_lost_lease_not_raised_when_asked(client: Client, q: str) -> None:
    with client.lock(q, lease=600, raise_if_lost=False) as lk:
        client.release_lock(q, lk.token)
        assert lk.wait_lost(10), "the lock's loss was not noticed"
    assert lk.lost
