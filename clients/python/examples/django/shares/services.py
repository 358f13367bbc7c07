"""Creating, revoking and changing shares, and keeping their chronoq task in step.

The rule: **the database commits first, chronoqd hears about it after.** Each
function changes the row inside ``transaction.atomic()`` and registers the
chronoq call with ``transaction.on_commit``. If the surrounding transaction
(the request, with ``ATOMIC_REQUESTS``) rolls back, the callback is dropped
and chronoqd never hears of a share that does not exist. Had we enqueued
directly, a rolled-back share would leave a task behind, and on SQLite the
rolled-back id is even handed to the next share, whose ``share:<id>`` task
would then be the stale one.

The price: a crash (or chronoqd being unreachable) between the commit and the
callback leaves a committed share without a task. The callbacks log that and
do not raise (the data is committed; failing the response would only hide
it). :func:`sync_share` puts one share's task right and can be run by hand or
from a periodic sweep.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chronoq import ChronoqError, Conflict, FailedPrecondition, NotFound
from sharesite.chronoq_client import chronoq_client

from .models import DEFAULT_PERIOD, Share

log = logging.getLogger("shares")


class ShareClosed(Exception):
    """The share was revoked or has expired: it cannot be changed."""


def _check_period(period: timedelta) -> timedelta:
    if period < timedelta(0):
        raise ValueError("a share's period cannot be negative")
    return period - timedelta(microseconds=period.microseconds % 1000)


def _now() -> datetime:
    """Now, in whole milliseconds: chronoqd's answers carry milliseconds, so
    the row's times and the task's ``run_at`` stay exactly equal."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond - now.microsecond % 1000)


# --- what the web side calls ---------------------------------------------------------


def create_share(file_name: str, *, period: timedelta = DEFAULT_PERIOD) -> Share:
    """Creates a share that expires ``period`` from now (7 days by default;
    ``timedelta(0)``: at once) and, once the transaction commits, schedules
    its expiry task."""
    period = _check_period(period)
    with transaction.atomic():
        now = _now()
        share = Share.objects.create(
            file_name=file_name, created_at=now, period=period, expires_at=now + period
        )
        transaction.on_commit(partial(_schedule, share.pk, share.expires_at))
    return share


def revoke_share(share: Share) -> Share:
    """Revokes an active share and, once committed, cancels its task.
    Revoking a revoked share does nothing; an expired one raises
    :class:`ShareClosed`."""
    with transaction.atomic():
        now = _now()
        # A conditional UPDATE, not read-then-save: the worker may be expiring
        # this very row, and exactly one of the two must win.
        updated = Share.objects.filter(
            pk=share.pk, revoked_at__isnull=True, expired_at__isnull=True
        ).update(revoked_at=now)
        if not updated:
            share.refresh_from_db()
            if share.revoked_at is not None:
                return share
            raise ShareClosed(f"share {share.pk} has expired")
        share.revoked_at = now
        transaction.on_commit(partial(_cancel, share.pk))
    return share


def change_period(share: Share, period: timedelta) -> Share:
    """Makes an active share expire ``period`` after it was created (sooner
    or later than before; a time already past expires it at once) and, once
    committed, moves its task to the new time. Raises :class:`ShareClosed`
    for a revoked or expired share."""
    period = _check_period(period)
    with transaction.atomic():
        expires_at = share.created_at + period
        updated = Share.objects.filter(
            pk=share.pk, revoked_at__isnull=True, expired_at__isnull=True
        ).update(period=period, expires_at=expires_at)
        if not updated:
            share.refresh_from_db()
            raise ShareClosed(f"share {share.pk} is {share.status}")
        share.period, share.expires_at = period, expires_at
        transaction.on_commit(partial(_reschedule, share.pk, expires_at))
    return share


def sync_share(share: Share) -> None:
    """Makes chronoqd agree with the committed row: an active share gets its
    task at ``expires_at`` (made, or moved), a revoked one loses it. For
    repairs after a callback could not reach chronoqd."""
    share.refresh_from_db()
    if share.revoked_at is not None:
        _cancel(share.pk)
    elif share.expired_at is None:
        _reschedule(share.pk, share.expires_at)


# --- the on_commit callbacks ---------------------------------------------------------


def _task_id(share_id: int) -> str:
    return f"share:{share_id}"


def _enqueue(share_id: int, expires_at: datetime, on_conflict: str) -> None:
    chronoq_client().enqueue(
        settings.CHRONOQ_SHARE_QUEUE,
        {"share": share_id},
        id=_task_id(share_id),
        run_at=expires_at,
        on_conflict=on_conflict,
    )


def _schedule(share_id: int, expires_at: datetime) -> None:
    # "ignore": if the task exists already (this call was resent after a
    # lost answer, or sync_share made it), it is ours; leave it be. The
    # default, "reject", would answer 409 to our own resend.
    try:
        _enqueue(share_id, expires_at, "ignore")
    except ChronoqError:
        log.exception("share %s: could not schedule its expiry (run sync_share)", share_id)


def _cancel(share_id: int) -> None:
    try:
        chronoq_client().cancel(_task_id(share_id))
    except (NotFound, FailedPrecondition):
        # No task (never made, or purged), or it is running or finished: the
        # handler sees revoked_at and leaves the share alone.
        pass
    except ChronoqError:
        log.exception("share %s: could not cancel its expiry task; the handler will "
                      "find the share revoked and do nothing", share_id)


def _reschedule(share_id: int, expires_at: datetime) -> None:
    try:
        chronoq_client().reschedule(_task_id(share_id), run_at=expires_at)
        return
    except (NotFound, FailedPrecondition):
        # Not scheduled: never made (chronoqd was down at create), dead, or
        # running right now. Make it anew at the new time; "replace" because
        # the new time must win over whatever is there.
        pass
    except ChronoqError:
        log.exception("share %s: could not move its expiry task (run sync_share); "
                      "the handler will not expire it before %s", share_id, expires_at)
        return
    try:
        _enqueue(share_id, expires_at, "replace")
    except Conflict:
        # Running: the handler reads the new expires_at and, if it is still
        # ahead, retries the task at that time.
        pass
    except ChronoqError:
        log.exception("share %s: could not schedule its expiry (run sync_share)", share_id)
