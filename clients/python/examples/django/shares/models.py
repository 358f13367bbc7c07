from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict

from django.db import models

DEFAULT_PERIOD = timedelta(days=7)


class Share(models.Model):
    """A link to a file that stops working at ``expires_at`` (``created_at``
    plus ``period``), or earlier when revoked.

    Exactly one chronoq task, ``share:<id>`` in ``settings.CHRONOQ_SHARE_QUEUE``,
    goes with an active share; it is due at ``expires_at`` and its handler
    sets ``expired_at``. See ``shares/services.py``.
    """

    file_name = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    period = models.DurationField(default=DEFAULT_PERIOD)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.file_name} (share {self.pk})"

    @property
    def task_id(self) -> str:
        """The client-chosen id of the share's chronoq task."""
        return f"share:{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.expired_at is None

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expired_at is not None:
            return "expired"
        return "active"

    def as_json(self) -> Dict[str, Any]:
        return {
            "id": self.pk,
            "file_name": self.file_name,
            "status": self.status,
            "created_at": self.created_at.isoformat(),
            "period_seconds": self.period.total_seconds(),
            "expires_at": self.expires_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "expired_at": self.expired_at.isoformat() if self.expired_at else None,
        }
