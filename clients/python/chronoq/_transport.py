"""HTTP transport: keep-alive connections (one per thread and node) and the
move from node to node of a cluster."""

from __future__ import annotations

import http.client
import json
import select
import ssl
import threading
import urllib.parse
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import ChronoqError, ConnectionFailed, InternalError, OutcomeUnknown, error_from_json

USER_AGENT = "chronoq-python/0.1.0"

# Methods whose request may be sent again after its answer was lost: applying
# them twice has the effect of applying them once (a DELETE applied twice may
# answer not_found the second time).
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})


@dataclass(frozen=True)
class Request:
    """One API call, as the transport sends it.

    ``resend`` says that the call may be sent again (to the next node) after it
    was sent in full and its answer was lost, even though its method is POST:
    a create with a client id, anything done with a token, a claim. GET, PUT,
    PATCH and DELETE are always resent. ``accept`` lists error statuses that
    are answers to return rather than errors to raise or move on from. A
    ``body`` of ``bytes`` is JSON already encoded; anything else is encoded.
    With ``raw_answer``, a 2xx answer's body is returned as it came (bytes),
    for the caller to decode when it needs it.
    """

    method: str
    path: str
    body: Any = None
    resend: bool = False
    extra_timeout: float = 0.0
    accept: Tuple[int, ...] = ()
    has_body: bool = field(default=False)
    raw_answer: bool = False

    @property
    def safe_to_resend(self) -> bool:
        return self.resend or self.method in _IDEMPOTENT_METHODS


@dataclass(frozen=True)
class Answer:
    """An answer: HTTP status, decoded JSON body (``None`` when empty) and the
    URL of the node that gave it."""

    status: int
    body: Any
    node: str


class _Node:
    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"{url!r}: the URL must start with http:// or https://")
        if not parts.hostname:
            raise ValueError(f"{url!r}: no host")
        if parts.query or parts.fragment:
            raise ValueError(f"{url!r}: a server URL takes no query or fragment")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{url!r}: bad port") from None
        self.url = url.strip().rstrip("/")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")


class _NotSent(Exception):
    """The request did not reach the node in full: nothing was done."""


class _AnswerLost(Exception):
    """The request was sent in full; no (complete) answer came."""


def parse_urls(urls: Any) -> List[str]:
    """Accepts a URL, a comma-separated list of URLs or a sequence of URLs."""
    if isinstance(urls, str):
        items = [u for u in (part.strip() for part in urls.split(",")) if u]
    else:
        items = [str(u).strip() for u in urls]
    if not items:
        raise ValueError("no server URL given")
    return items


class Transport:
    """Sends :class:`Request` objects to the nodes, moving to the next node on
    a connection failure or a 503 (see :class:`chronoq.Client`)."""

    def __init__(
        self,
        urls: Sequence[str],
        token: Optional[str],
        timeout: float,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.nodes = [_Node(u) for u in urls]
        self.token = token
        self.timeout = timeout
        self.ssl_context = ssl_context
        self._current = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        # Every thread's connections, to close them all; weak, so that a
        # finished thread's connections go with it.
        self._all: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()
        self._closed = False

    @property
    def current_url(self) -> str:
        """The node the next request goes to first."""
        with self._lock:
            return self.nodes[self._current].url

    def close(self) -> None:
        """Closes every connection of every thread."""
        with self._lock:
            conns = list(self._all)
        for conn in conns:
            conn.close()

    def _connection(self, index: int, timeout: float) -> http.client.HTTPConnection:
        conns: Optional[Dict[int, http.client.HTTPConnection]] = getattr(self._local, "conns", None)
        if conns is None:
            conns = {}
            self._local.conns = conns
        conn = conns.get(index)
        if conn is not None and conn.sock is not None:
            # A keep-alive connection the server closed while it was idle reads
            # as ready (EOF): open a new one rather than send into it.
            try:
                readable, _, _ = select.select([conn.sock], [], [], 0)
            except (OSError, ValueError):
                readable = [conn.sock]
            if readable:
                conn.close()
        if conn is None:
            node = self.nodes[index]
            if node.https:
                conn = http.client.HTTPSConnection(
                    node.host, node.port, timeout=timeout, context=self.ssl_context
                )
            else:
                conn = http.client.HTTPConnection(node.host, node.port, timeout=timeout)
            conns[index] = conn
            with self._lock:
                self._all.add(conn)
        return conn

    def _attempt(self, index: int, req: Request, body: Optional[bytes]) -> Tuple[int, bytes]:
        node = self.nodes[index]
        conn = self._connection(index, self.timeout)
        conn.timeout = self.timeout
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            if conn.sock is None:
                conn.connect()
            sock = conn.sock
            if sock is not None:
                sock.settimeout(self.timeout)
            conn.request(req.method, node.prefix + req.path, body=body, headers=headers)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _NotSent(_describe(e)) from e
        try:
            sock = conn.sock
            if sock is not None:
                sock.settimeout(self.timeout + req.extra_timeout)
            resp = conn.getresponse()
            data = resp.read()
            if resp.will_close:
                conn.close()
            return resp.status, data
        except (OSError, http.client.HTTPException, AttributeError) as e:
            conn.close()
            raise _AnswerLost(_describe(e)) from e

    def send(self, req: Request) -> Answer:
        """Sends ``req`` and returns the answer, or raises the error.

        Tries the current node, then each other node once (wrapping around),
        moving on when a node cannot be connected to, answers 503, or loses the
        answer of a request that is safe to resend. Raises the server's error
        (a :class:`~chronoq.ChronoqError` subclass) for any other error status,
        the last 503 when every node answered 503 or none could be reached,
        :class:`~chronoq.ConnectionFailed` when no node could be reached, and
        :class:`~chronoq.OutcomeUnknown` when a request that is not safe to
        resend lost its answer (or one that is lost it on the last node it
        was sent to).
        """
        body = None
        if isinstance(req.body, bytes):
            body = req.body
        elif req.has_body or req.body is not None:
            body = json.dumps(req.body, separators=(",", ":"), ensure_ascii=False).encode()
        with self._lock:
            start = self._current
        n = len(self.nodes)
        notes: List[str] = []
        last_unavailable: Optional[ChronoqError] = None
        lost_at: Optional[str] = None
        for i in range(n):
            index = (start + i) % n
            node = self.nodes[index]
            try:
                status, data = self._attempt(index, req, body)
            except _NotSent as e:
                notes.append(f"{node.url}: {e}")
                continue
            except _AnswerLost as e:
                if req.safe_to_resend:
                    notes.append(f"{node.url}: {e} (after the request was sent)")
                    lost_at = node.url
                    continue
                raise OutcomeUnknown(
                    f"{req.method} {req.path}: {node.url}: {e} after the request was sent; "
                    "it may or may not have been done (not resent: it is not safe to resend)",
                    node=node.url,
                ) from None
            if req.raw_answer and 200 <= status < 300:
                with self._lock:
                    self._current = index
                return Answer(status, data, node.url)
            answer = self._decode(status, data, node.url)
            if status == 503 and status not in req.accept:
                err = error_from_json(_error_of(answer.body), status, node.url)
                notes.append(f"{node.url}: 503 {err}")
                last_unavailable = err
                continue
            with self._lock:
                self._current = index
            if status >= 400 and status not in req.accept:
                raise error_from_json(_error_of(answer.body), status, node.url)
            return answer
        if last_unavailable is not None:
            if n > 1:
                last_unavailable.message = "no node could do it: " + "; ".join(notes)
                last_unavailable.args = (last_unavailable.message,)
            raise last_unavailable
        text = ("no node answered: " if n > 1 else "") + "; ".join(notes)
        if lost_at is not None:
            raise OutcomeUnknown(
                f"{req.method} {req.path}: {text}; it may or may not have been done "
                "(it is safe to send again)",
                node=lost_at,
            )
        raise ConnectionFailed(text, node=self.nodes[start].url)

    @staticmethod
    def _decode(status: int, data: bytes, node: str) -> Answer:
        if not data.strip():
            return Answer(status, None, node)
        try:
            return Answer(status, json.loads(data), node)
        except ValueError:
            if status >= 400:
                # Not JSON (a proxy's page, say): keep the text as the message.
                text = data.decode("utf-8", "replace").strip()[:500]
                return Answer(status, {"error": {"message": text}}, node)
            raise InternalError(
                f"{node}: answer is not JSON: {data[:200]!r}", code="bad_response", status=status
            ) from None


def _error_of(body: Any) -> Any:
    return body.get("error") if isinstance(body, dict) else None


def _describe(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, TimeoutError) or type(e).__name__ == "timeout":
        return "timed out"
    if isinstance(e, http.client.RemoteDisconnected):
        return "connection closed without an answer"
    text = str(e) or type(e).__name__
    return text
