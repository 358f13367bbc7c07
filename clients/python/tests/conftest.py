"""Fixtures: a real chronoqd per test session, fake nodes, and waiting helpers.

The chronoqd binary comes from ``$CHRONOQD`` (default: the dev build of the
checkout). No test sleeps to let time pass: tests wait for conditions, each
with a deadline that says what it waited for.
"""

from __future__ import annotations

import http.server
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
sys.path.insert(0, str(PACKAGE_ROOT))

from chronoq import Client  # noqa: E402

# The checkout's developer build (build/dev, see the top-level Makefile).
DEFAULT_CHRONOQD = str(PACKAGE_ROOT.parents[1] / "build" / "dev" / "src" / "server" / "chronoqd")


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Polls ``cond`` until it returns something true; fails naming ``what``
    if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


class Server:
    """A chronoqd process listening on a free port with a temporary data dir."""

    def __init__(self, data: str, token: Optional[str] = None, extra: Sequence[str] = ()) -> None:
        binary = os.environ.get("CHRONOQD", DEFAULT_CHRONOQD)
        if not os.access(binary, os.X_OK):
            pytest.fail(f"chronoqd not found at {binary} (set CHRONOQD)")
        env = dict(os.environ)
        env.pop("CHRONOQ_TOKEN", None)
        env.pop("CHRONOQ_TOKEN_FILE", None)
        args = [binary, "--listen", "127.0.0.1:0", "--data", data]
        if token is not None:
            token_file = os.path.join(data, "token")
            os.makedirs(data, exist_ok=True)
            Path(token_file).write_text(token + "\n")
            args += ["--token-file", token_file]
        args += list(extra)  # a cluster node's --cluster --store ...
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.log: List[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + 15
        self.url = ""
        while not self.url:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop(check=False)
                pytest.fail("chronoqd did not say 'listening on' within 15 s: " + "".join(self.log))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            m = re.search(r"listening on (https?://[0-9.]+:\d+)", line)
            if m:
                self.url = m.group(1)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            self.lines.put(line)

    def kill(self) -> None:
        """Ends chronoqd as a crash of its machine would (SIGKILL)."""
        self.proc.kill()
        self.proc.wait(timeout=15)

    def stop(self, check: bool = True) -> None:
        """SIGTERM, then SIGKILL after 15 s. With ``check``, fails unless
        chronoqd, still running, stopped with status 0: a crash at shutdown or
        a sanitizer's report (the tests run the ASan+UBSan build, whose
        LeakSanitizer checks at exit) fails the test, with chronoqd's log."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
            if check:
                pytest.fail("chronoqd did not stop within 15 s of SIGTERM: " + "".join(self.log))
            return
        if check and code != 0:
            pytest.fail(f"chronoqd exited with {code} after SIGTERM: " + "".join(self.log)[-4000:])


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="chronoq-py-") as data:
        s = Server(data)
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture()
def own_server() -> Iterator[Server]:
    """A chronoqd of the test's own (for tests that stop it)."""
    with tempfile.TemporaryDirectory(prefix="chronoq-py-own-") as data:
        s = Server(data)
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture()
def client(server: Server) -> Iterator[Client]:
    c = Client(server.url, timeout=10)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def q() -> str:
    """A queue name of the test's own."""
    return "py-" + uuid.uuid4().hex[:10]


def closed_port_url() -> str:
    """The URL of a port nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


class FakeNode:
    """An HTTP server that answers every request as ``respond`` says:
    ``(status, json_body)``, or ``None`` to read the request and close the
    connection without answering. Records the requests it got."""

    def __init__(self, respond: Callable[[str, str, Any], Optional[Tuple[int, Any]]]) -> None:
        self.requests: List[Tuple[str, str, Any]] = []
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                node.requests.append((self.command, self.path, body))
                answer = respond(self.command, self.path, body)
                if answer is None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, payload = answer
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def fake_node() -> Iterator[Callable[..., FakeNode]]:
    nodes: List[FakeNode] = []

    def make(respond: Callable[[str, str, Any], Optional[Tuple[int, Any]]]) -> FakeNode:
        n = FakeNode(respond)
        nodes.append(n)
        return n

    yield make
    for n in nodes:
        n.close()


def error_body(code: str, message: str = "x", field: Optional[str] = None) -> Dict[str, Any]:
    e: Dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        e["field"] = field
    return {"error": e}
