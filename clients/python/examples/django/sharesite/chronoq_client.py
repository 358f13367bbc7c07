"""The process's one chronoq Client, built from settings.

``chronoq_client()`` is what views, services and the worker command use. The
client is thread-safe (one keep-alive connection per thread), so one per
process is right; it is built on first use, so importing this module talks to
nobody. Changing a ``CHRONOQ_*`` setting (``override_settings`` in tests)
drops it and the next call builds a new one.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from chronoq import Client

_lock = threading.Lock()
_client: Optional[Client] = None


def chronoq_client() -> Client:
    """The shared :class:`chronoq.Client` for ``settings.CHRONOQ_URL``."""
    global _client
    with _lock:
        if _client is None:
            _client = Client(
                settings.CHRONOQ_URL,
                token=settings.CHRONOQ_TOKEN,
                timeout=settings.CHRONOQ_TIMEOUT,
            )
        return _client


def reset_chronoq_client() -> None:
    """Closes the shared client; the next :func:`chronoq_client` makes a new one."""
    global _client
    with _lock:
        client, _client = _client, None
    if client is not None:
        client.close()


@receiver(setting_changed)
def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith("CHRONOQ_"):
        reset_chronoq_client()
