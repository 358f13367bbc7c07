"""The handler of the expire-share queue (run by ``manage.py chronoq_worker``)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from chronoq import Lease, RetryLater

from .models import Share

log = logging.getLogger("shares")

#: How early (chronoqd's clock ahead of ours) a task may come and still expire
#: its share.
CLOCK_SLACK = timedelta(seconds=1)


def expire_share(task: Lease) -> None:
    """Expires the share ``task.payload["share"]`` if it is active and due.

    Idempotent, and trusts the database over the task: a revoked, expired or
    deleted share is left alone (the task succeeds); a share whose period
    was extended after the task was last moved (a reschedule that lost a
    race or could not reach chronoqd) is not expired early: the task is
    retried at the share's new ``expires_at``.
    """
    share_id = int(task.payload["share"])
    now = timezone.now()
    # One conditional UPDATE, so a revoke or a period change committed in
    # the meantime wins cleanly.
    expired = Share.objects.filter(
        pk=share_id,
        revoked_at__isnull=True,
        expired_at__isnull=True,
        expires_at__lte=now + CLOCK_SLACK,
    ).update(expired_at=now)
    if expired:
        log.info("share %s expired (task %s)", share_id, task.id)
        return
    share = Share.objects.filter(pk=share_id).first()
    if share is None or not share.is_active:
        log.info("share %s is %s: nothing to do", share_id,
                 "gone" if share is None else share.status)
        return
    raise RetryLater(
        f"share {share_id} now expires at {share.expires_at.isoformat()}",
        delay=share.expires_at - now,
    )
