"""``manage.py chronoq_worker``: runs the expire-share handler until SIGTERM.

::

    CHRONOQ_URL=http://127.0.0.1:7070 python manage.py chronoq_worker --concurrency 4

The first SIGTERM or SIGINT (Ctrl-C) stops claiming, lets running handlers
finish, sends their outcomes and exits 0; a second one stops waiting for the
handlers (their tasks run again once their leases lapse). Exits 1 when
chronoqd refuses the worker for good (a wrong token, a bad queue name).
"""

from __future__ import annotations

import functools
from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connections

from chronoq import ChronoqError, Lease, Worker
from chronoq.worker import Handler
from sharesite.chronoq_client import chronoq_client
from shares.tasks import expire_share


def with_fresh_connections(fn: Handler) -> Handler:
    """Wraps a handler as Django wraps a request: connections that broke or
    outlived ``CONN_MAX_AGE`` are closed before the task and after it (each
    handler thread has its own connection, and a worker lives for days)."""

    @functools.wraps(fn)
    def run(task: Lease) -> Any:
        close_old_connections()
        try:
            return fn(task)
        finally:
            close_old_connections()

    return run


class Command(BaseCommand):
    help = "Runs a chronoq worker that expires shares when their task comes due."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queue", default=None,
            help="queue to work (default: settings.CHRONOQ_SHARE_QUEUE)",
        )
        parser.add_argument(
            "--concurrency", type=int, default=4, help="handlers running at once (default 4)"
        )
        parser.add_argument(
            "--lease", type=float, default=60.0,
            help="seconds each claimed task is leased for; extended while it runs (default 60)",
        )
        parser.add_argument(
            "--wait", type=float, default=5.0,
            help="seconds a claim waits for a due task; a stop takes up to this long (default 5)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue: str = options["queue"] or settings.CHRONOQ_SHARE_QUEUE
        client = chronoq_client()
        try:
            worker = Worker(
                client,
                concurrency=options["concurrency"],
                lease=timedelta(seconds=options["lease"]),
                wait=timedelta(seconds=options["wait"]),
            )
        except ValueError as e:
            raise CommandError(str(e)) from e
        worker.register(queue, with_fresh_connections(expire_share))
        self.stdout.write(
            f"chronoq worker on queue {queue!r} at {client.current_url} "
            f"(concurrency {worker.concurrency}); SIGTERM or Ctrl-C stops it"
        )
        self.stdout.flush()
        try:
            worker.run()  # installs its SIGTERM/SIGINT handlers: we run in the main thread
        except ChronoqError as e:
            raise CommandError(f"worker stopped: {e}") from e
        finally:
            connections.close_all()
            client.close()
        s = worker.stats
        self.stdout.write(
            f"worker stopped: {s.claimed} claimed, {s.succeeded} succeeded, {s.failed} failed"
        )
