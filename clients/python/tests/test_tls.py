"""https with a CA file (C16): chronoqd serving TLS with a throwaway CA's
certificate (tests/support/make-test-certs.sh), and clients that trust that
CA or do not."""

from __future__ import annotations

import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from chronoq import Client, ConnectionFailed
from conftest import PACKAGE_ROOT, Server

MAKE_CERTS = PACKAGE_ROOT.parents[1] / "tests" / "support" / "make-test-certs.sh"


@pytest.fixture(scope="module")
def tls_server() -> Iterator[Tuple[Server, Path]]:
    """A chronoqd serving https, and the directory of its CA (ca.pem)."""
    with tempfile.TemporaryDirectory(prefix="chronoq-py-tls-") as tmp:
        certs = Path(tmp)
        subprocess.run(["bash", str(MAKE_CERTS), str(certs)], check=True, timeout=60)
        s = Server(
            str(certs / "data"),
            extra=["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key")],
        )
        try:
            yield s, certs
        finally:
            s.stop()


def test_https_with_the_ca_file(tls_server: Tuple[Server, Path]) -> None:  # C16
    server, certs = tls_server
    assert server.url.startswith("https://127.0.0.1:")
    with Client(server.url, ca_file=str(certs / "ca.pem")) as c:
        assert c.health()["status"] == "ok"
        t = c.enqueue("tls", {"n": 1}, id="tls:1")  # and a write on the same connection
        assert c.get("tls:1").id == t.id


def test_a_ca_that_did_not_sign_the_certificate_is_refused(
    tls_server: Tuple[Server, Path]
) -> None:  # C16
    server, certs = tls_server
    for c in (Client(server.url, ca_file=str(certs / "other-ca.pem")), Client(server.url)):
        with c, pytest.raises(ConnectionFailed, match="CERTIFICATE_VERIFY_FAILED"):
            c.health()


def test_bad_ca_options() -> None:
    with pytest.raises(FileNotFoundError):
        Client("https://127.0.0.1:1", ca_file="/nonexistent/ca.pem")
    with pytest.raises(ValueError, match="not both"):
        Client("https://127.0.0.1:1", ca_file="x", ssl_context=ssl.create_default_context())
