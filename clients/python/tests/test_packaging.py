"""``pip install ./clients/python`` works offline, with what Debian ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PACKAGE_ROOT


def test_pip_installs_the_package_offline(tmp_path: Path) -> None:
    # A copy: pip builds in the source tree, which must stay clean.
    src = tmp_path / "src"
    shutil.copytree(
        PACKAGE_ROOT, src,
        ignore=shutil.ignore_patterns("tests", "examples", "__pycache__", "build", "*.egg-info"),
    )
    site = tmp_path / "site"
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation",
         "--target", str(site), str(src)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site / "chronoq" / "py.typed").exists(), "the package is not marked typed"
    r = subprocess.run(
        [sys.executable, "-c", "import chronoq; print(chronoq.__file__, chronoq.Worker.__name__)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(site)),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(site / "chronoq")) and "Worker" in r.stdout
