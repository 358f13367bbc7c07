"""Set-up shared by conftest.py and the tests (imported by both under this
one name, unlike ``conftest``, which pytest may import more than once).

Importing it sets Django up with the project's real settings and the SQLite
database in a temporary directory (``SHARESITE_DB``; conftest.py migrates it
once per session and removes the directory at the end). ``Server`` (a
chronoqd on a free port), ``FakeTime`` (moves a test-clock chronoqd's time)
and ``wait_for`` are the client tests' helpers,
loaded from clients/python/tests/conftest.py under a name of their own so
they cannot clash with this directory's conftest.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent                # clients/python/examples/django
PYTHON_CLIENT = PROJECT.parents[1]   # clients/python: the chronoq package
for _p in (str(PYTHON_CLIENT), str(PROJECT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def _load_client_test_support() -> ModuleType:
    path = PYTHON_CLIENT / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location("chronoq_client_test_support", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_support = _load_client_test_support()
Server = _support.Server
FakeTime = _support.FakeTime
wait_for = _support.wait_for

TMP = tempfile.mkdtemp(prefix="chronoq-django-")
DB_PATH = os.path.join(TMP, "shares.sqlite3")
os.environ["SHARESITE_DB"] = DB_PATH
os.environ["DJANGO_SETTINGS_MODULE"] = "sharesite.settings"

import django  # noqa: E402

django.setup()
