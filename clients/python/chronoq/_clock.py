"""The time source of the client's own timers (not public API).

The lease extensions of a :class:`~chronoq.Worker` and of a
:class:`~chronoq.Lock` are scheduled on a :class:`Clock`: a monotonic ``now``
and a wait on a condition that ends when it is notified or when ``now``
reaches a deadline. :data:`REAL` keeps the machine's time; a test gives a
client another (``Client(url, _clock=fake)``, which its workers and locks
use) whose time moves only when the test says, so that an extension happens
exactly when the test moves time rather than after a real interval.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Real time: :func:`time.monotonic` and a timed
    :meth:`threading.Condition.wait`. A replacement must be thread-safe and
    implement the same two methods."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes back."""
        return time.monotonic()

    def wait_until(self, cond: threading.Condition, deadline: float) -> None:
        """Waits on ``cond`` (whose lock the caller holds) until it is
        notified or :meth:`monotonic` reaches ``deadline``; may also return
        early (the caller checks what it waits for again)."""
        left = deadline - self.monotonic()
        if left > 0:
            cond.wait(left)


#: The clock of every client not given another.
REAL = Clock()
