"""Fixtures of the recipe's tests: the migrated temporary database, a chronoqd
on a test clock per session, and the app's client pointed at it (see
recipe_support.py)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Iterator

import pytest

from recipe_support import TMP, Server  # sets Django up

from django.core.management import call_command  # noqa: E402  (after django.setup())
from django.db import connections  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from chronoq import Client  # noqa: E402
from sharesite.chronoq_client import chronoq_client  # noqa: E402


def pytest_unconfigure(config: pytest.Config) -> None:
    connections.close_all()
    shutil.rmtree(TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def database() -> None:
    call_command("migrate", verbosity=0, interactive=False)


@pytest.fixture(scope="session")
def chronoqd() -> Iterator["Server"]:
    """A chronoqd on a test clock (``--test-clock``): its time stands still
    from start-up; the worker's test moves it (``FakeTime``) to make a share's
    task due and to run out the wait of the worker's last claim."""
    with tempfile.TemporaryDirectory(prefix="chronoq-django-qd-") as data:
        server = Server(data, extra=["--test-clock"])
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture()
def client(chronoqd: "Server", database: None) -> Iterator[Client]:
    """The app's shared client (``chronoq_client()``), pointed at the test's
    chronoqd through the settings, as a deployment would be."""
    with override_settings(CHRONOQ_URL=chronoqd.url, CHRONOQ_TOKEN=None):
        yield chronoq_client()
