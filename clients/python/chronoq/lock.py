"""The lock context manager of :meth:`chronoq.Client.lock`."""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Type

from .errors import ChronoqError, LockLost, StaleToken
from .models import Duration, LockGrant, to_millis

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("chronoq.lock")


class Lock:
    """A keyed lock held for the duration of a ``with`` block.

    Use :meth:`chronoq.Client.lock` to make one. While held, a daemon thread
    extends the lease every third of ``lease``; an extension that fails for
    another reason than ``stale_token`` (the server unreachable, say) is
    logged and tried again at the next turn.

    Attributes:
        key: the lock's key.
        grant: the current :class:`~chronoq.LockGrant` (``None`` before it is
            acquired).
        lost: true once an extension or the release was refused with
            ``stale_token``: the lease had lapsed and another holder may have
            had the lock since.
        extensions: how many extensions succeeded.
    """

    def __init__(
        self,
        client: "Client",
        key: str,
        *,
        wait: Duration = 5000,
        lease: Duration = 30000,
        owner: Optional[str] = None,
        raise_if_lost: bool = True,
    ) -> None:
        self.client = client
        self.key = key
        self.wait_ms = to_millis(wait, "wait")
        self.lease_ms = to_millis(lease, "lease")
        self.owner = owner
        self.raise_if_lost = raise_if_lost
        self.grant: Optional[LockGrant] = None
        self.lost = False
        self.extensions = 0
        self._lost_event = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._mu = threading.Lock()
        # Notified when the lock is released: the extending thread waits on
        # it, on the client's clock, until its next extension is due.
        self._stop_cv = threading.Condition(self._mu)
        self._stopped = False
        self._clock = client._clock
        self._held = False

    @property
    def token(self) -> int:
        """The fencing token of the grant: pass it to the resource the lock
        guards, which refuses tokens below the largest it has seen."""
        if self.grant is None:
            raise RuntimeError(f"lock {self.key!r} is not held")
        return self.grant.token

    @property
    def expires_at(self) -> Optional[datetime]:
        """When the lease ends unless extended again."""
        return self.grant.expires_at if self.grant is not None else None

    def acquire(self) -> LockGrant:
        """Acquires the lock and starts extending it; raises
        :class:`~chronoq.LockWaitTimeout` if it stayed held for the wait."""
        if self._held:
            raise RuntimeError(f"lock {self.key!r} is already held")
        self.grant = self.client.acquire_lock(
            self.key, wait=self.wait_ms, lease=self.lease_ms, owner=self.owner
        )
        self._held = True
        self.lost = False
        self.extensions = 0
        self._lost_event.clear()
        self._stopped = False
        first = self._clock.monotonic() + self._interval()
        self._thread = threading.Thread(
            target=self._extend_loop, args=(first,), name=f"chronoq-lock-{self.key}", daemon=True
        )
        self._thread.start()
        return self.grant

    def _mark_lost(self, e: ChronoqError) -> None:
        if not self.lost:
            log.warning("lost the lock on %s (token %s): %s", self.key, self.token, e)
        self.lost = True
        self._lost_event.set()

    def _interval(self) -> float:
        """Seconds between extensions: a third of the lease."""
        return max(self.lease_ms / 3000.0, 0.001)

    def _extend_loop(self, next_at: float) -> None:
        """Extends the lease when ``next_at`` comes (on the client's clock),
        then a third of the lease after each answer, until released."""
        clock = self._clock
        while True:
            with self._mu:
                while not self._stopped and clock.monotonic() < next_at:
                    clock.wait_until(self._stop_cv, next_at)
                if self._stopped or self.grant is None:
                    return
                token = self.grant.token
            try:
                grant = self.client.extend_lock(self.key, token, self.lease_ms)
            except StaleToken as e:
                self._mark_lost(e)
                return
            except ChronoqError as e:
                log.warning("could not extend the lock on %s (will retry): %s", self.key, e)
                next_at = clock.monotonic() + self._interval()
                continue
            with self._mu:
                if self.grant is not None:
                    self.grant = grant
                    self.extensions += 1
            next_at = clock.monotonic() + self._interval()

    def check(self) -> None:
        """Raises :class:`~chronoq.LockLost` if the lease was lost."""
        if self.lost:
            raise LockLost(
                f"the lock on {self.key} (token {self.token}) was lost: its lease lapsed",
                field="token",
            )

    def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lease is lost or ``timeout`` seconds pass; returns
        :attr:`lost`."""
        return self._lost_event.wait(timeout)

    def release(self) -> None:
        """Stops extending and releases the lock (a lost lock is not
        released: it is no longer ours)."""
        with self._mu:
            self._stopped = True
            self._stop_cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        if not self._held or self.grant is None:
            return
        self._held = False
        if not self.lost:
            try:
                self.client.release_lock(self.key, self.grant.token)
            except StaleToken as e:
                self._mark_lost(e)

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            self.release()
        except ChronoqError:
            if exc_type is None:
                raise
            log.warning("could not release the lock on %s", self.key, exc_info=True)
        if self.lost and self.raise_if_lost and exc_type is None:
            self.check()
