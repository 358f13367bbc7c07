"""Fixtures: real chronoqds per test session (one keeping real time, one on
a test clock), fake time, fake nodes, and waiting helpers.

The chronoqd binary comes from ``$CHRONOQD`` (default: the dev build of the
checkout). Time in tests is fake: no test sleeps to let time pass, and no
outcome depends on real time passing. A test of leases, lock and claim waits
or due times runs on ``chronoqd --test-clock`` (the ``tc_server`` fixture)
with a :class:`FakeTime` (the ``fake_time`` fixture), which moves the
server's time (``POST /v1/test/clock``) and the client's timers (a
:class:`FakeClock` given to the client as ``_clock``) together. Tests wait
for conditions (a request to arrive, a wait to begin, a task to be acked),
each with a deadline that says what it waited for.
"""

from __future__ import annotations

import datetime
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
from chronoq.models import parse_time  # noqa: E402

# The checkout's developer build (build/dev, see the top-level Makefile).
DEFAULT_CHRONOQD = str(PACKAGE_ROOT.parents[1] / "build" / "dev" / "src" / "server" / "chronoqd")


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 10.0,
             details: Optional[Callable[[], str]] = None) -> Any:
    """Polls ``cond`` until it returns something true; fails naming ``what``
    (and ``details()``) if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f" ({details()})" if details is not None else ""
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}{more}")
        time.sleep(0.01)  # polling interval: no outcome depends on it


class InThread:
    """Runs ``fn()`` in a thread of its own (a call that waits in chronoqd
    until the test moves time); :meth:`result` joins it with a deadline and
    returns its value or raises its exception."""

    def __init__(self, fn: Callable[[], Any], what: str) -> None:
        self.what = what
        self._value: Any = None
        self._error: Optional[BaseException] = None

        def run() -> None:
            try:
                self._value = fn()
            except BaseException as e:  # noqa: BLE001 - handed to result()
                self._error = e

        self._thread = threading.Thread(target=run, name=what, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self, timeout: float = 10.0) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            pytest.fail(f"{self.what} did not end within {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        return self._value


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


@pytest.fixture(scope="session")
def tc_server() -> Iterator[Server]:
    """A chronoqd on a test clock (``--test-clock``): its time stands still
    and moves only when a test posts to /v1/test/clock (see FakeTime)."""
    with tempfile.TemporaryDirectory(prefix="chronoq-py-tc-") as data:
        s = Server(data, extra=["--test-clock"])
        try:
            yield s
        finally:
            s.stop()


class FakeClock:
    """The client's clock in a test (``Client(url, _clock=FakeClock())``):
    ``monotonic()`` stands still until :meth:`advance`, which wakes the
    waits whose deadline it reached. Its waits (:meth:`wait_until`) are the
    timers of the client's workers and locks: :meth:`deadlines` lists them,
    so a test knows that a timer is set before it moves time."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._now = 0.0
        self._waits: List[Tuple[float, threading.Condition]] = []

    def monotonic(self) -> float:
        with self._mu:
            return self._now

    def wait_until(self, cond: threading.Condition, deadline: float) -> None:
        # The caller holds cond's lock, so advance() (which takes it to
        # notify) cannot wake us before cond.wait() has released it.
        entry = (deadline, cond)
        with self._mu:
            if deadline <= self._now:
                return
            self._waits.append(entry)
        try:
            cond.wait()  # until advance() or the library itself notifies
        finally:
            with self._mu:
                self._waits.remove(entry)

    def deadlines(self) -> List[float]:
        """The deadlines of the waits in progress, earliest first."""
        with self._mu:
            return sorted(d for d, _ in self._waits)

    def advance(self, seconds: float) -> None:
        with self._mu:
            self._now += seconds
            due = [cond for d, cond in self._waits if d <= self._now]
        for cond in due:
            with cond:
                cond.notify_all()


class FakeTime:
    """A test's time: the test-clock chronoqd's and the client's timers'
    (a FakeClock), moved together by :meth:`advance`. Make clients with
    :meth:`client`, so their workers and locks use the fake clock."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.clock = FakeClock()
        self.admin = Client(server.url, timeout=10)
        self._clients: List[Client] = []

    def client(self) -> Client:
        c = Client(self.server.url, timeout=10, _clock=self.clock)
        self._clients.append(c)
        return c

    def close(self) -> None:
        for c in self._clients + [self.admin]:
            c.close()

    def server_clock(self) -> Dict[str, Any]:
        answer: Dict[str, Any] = self.admin.request("GET", "/v1/test/clock")
        return answer

    def server_now(self) -> datetime.datetime:
        return _parse_time(self.server_clock()["now"])

    def server_waiting(self, ms: int) -> bool:
        """Whether a wait of the server's ends ``ms`` from its now (a claim
        or lock wait of ``ms`` that has begun)."""
        clock = self.server_clock()
        due = _parse_time(clock["now"]) + datetime.timedelta(milliseconds=ms)
        return any(_parse_time(w) == due for w in clock["waits"])

    def wait_server_wait(self, ms: int, what: str) -> None:
        """Waits (with a deadline) until the server waits for ``ms`` from
        now: ``what`` (a claim's or a lock's wait) has begun."""
        wait_for(lambda: self.server_waiting(ms),
                 f"{what} to wait {ms} ms in chronoqd (its deadline among the "
                 f"server's waits, which only lists the earliest: no other may be sooner)",
                 details=lambda: f"GET /v1/test/clock: {self.server_clock()}")

    def client_timer_set(self, ms: int) -> bool:
        """Whether a timer of the client is set to ``ms`` from its now."""
        due = self.clock.monotonic() + ms / 1000.0
        return any(abs(d - due) < 1e-6 for d in self.clock.deadlines())

    def wait_client_timer(self, ms: int, what: str) -> None:
        """Waits (with a deadline) until a timer of the client (an
        extension) is set to fire ``ms`` from now."""
        wait_for(lambda: self.client_timer_set(ms), f"{what} to be set for {ms} ms from now")

    def advance(self, ms: int) -> None:
        """Moves the server's time, then the client's, by ``ms``; the
        server has acted on its new time when this returns (due tasks
        handed out, lapsed leases and locks freed, waits answered)."""
        self.admin.request("POST", "/v1/test/clock", {"advance_ms": ms})
        self.clock.advance(ms / 1000.0)

    def advance_to(self, when: datetime.datetime) -> None:
        """Moves time (both clocks) forward to ``when`` of the server's
        clock, rounded up to the millisecond."""
        left = when - self.server_now()
        ms = -(-left // datetime.timedelta(milliseconds=1))
        assert ms >= 0, f"{when} is before the server's now: time only moves forward"
        self.advance(ms)

    def run_out_until(self, done: Callable[[], bool], wait_ms: int, what: str,
                      timeout: float = 10.0) -> None:
        """Waits until ``done()``; whenever a server wait of ``wait_ms``
        (a worker's claim long-poll) has begun meanwhile, moves time past it
        so it answers. For stopping workers, whose stop waits for the claims
        in flight."""

        def check() -> bool:
            if done():
                return True
            if self.server_waiting(wait_ms):
                self.advance(wait_ms)
            return False

        wait_for(check, what, timeout=timeout)


def _parse_time(text: str) -> datetime.datetime:
    t = parse_time(text)
    assert t is not None, "GET /v1/test/clock gave no time"
    return t


@pytest.fixture()
def fake_time(tc_server: Server) -> Iterator[FakeTime]:
    t = FakeTime(tc_server)
    try:
        yield t
    finally:
        t.close()


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
        # serve_forever() checks for shutdown() between polls: a short poll
        # keeps close() from waiting the default 0.5 s.
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()

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
