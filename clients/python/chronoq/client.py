"""The synchronous chronoq client."""

from __future__ import annotations

import enum
import json
import os
import re
import ssl
import urllib.parse
from datetime import datetime
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ._clock import REAL, Clock
from .errors import ChronoqError, InternalError
from ._transport import Answer, Request, Transport, parse_urls
from .lock import Lock
from .models import (
    JSON,
    AckLike,
    AckResult,
    Backoff,
    ClaimResult,
    Duration,
    Lease,
    LockGrant,
    LockInfo,
    Page,
    QueueInfo,
    RateLimit,
    Schedule,
    Target,
    Task,
    TaskList,
    TaskSpec,
    Time,
    ack_item,
    format_time,
    parse_time,
    to_millis,
)

DEFAULT_URL = "http://127.0.0.1:7070"
MAX_BATCH = 10_000
MAX_BODY = 1 << 20


class _Unset(enum.Enum):
    UNSET = 0


#: Leaves a setting out of a request (as opposed to ``None``, which sends
#: ``null``: back to the default).
UNSET = _Unset.UNSET

# Compact, and made once: json.dumps would make an encoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_BATCH_FIELD = re.compile(r"^tasks\[(\d+)\]")


def _seg(value: str) -> str:
    """One percent-encoded path segment."""
    return urllib.parse.quote(value, safe="")


def _seconds(ms: int) -> float:
    return ms / 1000.0


def _backoff_json(value: Union[Backoff, Mapping[str, Any], None]) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    return value.to_json() if isinstance(value, Backoff) else dict(value)


def _target_json(value: Union[Target, Mapping[str, Any], None]) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    return value.to_json() if isinstance(value, Target) else dict(value)


class Client:
    """A client of chronoqd's HTTP/JSON API.

    Args:
        url: the server's URL (``http://127.0.0.1:7070``), or several nodes of
            a cluster as a list or a comma-separated string. Defaults to the
            ``CHRONOQ_URL`` environment variable (same forms), else
            ``http://127.0.0.1:7070``. A path prefix is kept; https works.
        token: the API token (``Authorization: Bearer``); defaults to
            ``CHRONOQ_TOKEN``.
        timeout: seconds to wait for each node's answer (long polls and lock
            waits add their wait to it).
        ssl_context: for https URLs, the TLS context (default: the system's).
        ca_file: for https URLs, a PEM file of the CA certificates to trust
            instead of the system's (a private CA); the server's certificate
            and host name are checked as always. Not with ``ssl_context``.

    The client is thread-safe and keeps one keep-alive connection per thread
    and node.

    **Several nodes.** A request goes to the current node (the one that
    answered the last request; at first the first of the list). When that
    node cannot be connected to or answers 503 (``unavailable``,
    ``not_leader``, ``leader_unavailable``, ``store_unavailable``), the
    request goes to the next node, once per node at most, wrapping around
    the list. A request that was sent in full and then lost its connection
    or timed out waiting for the answer may have been done by that node: it
    is sent to the next node only when it is safe to send twice: GET, PUT,
    PATCH and DELETE requests, and the POSTs each method's docstring says
    are *resent* (a create with a client ``id``, anything done with a token,
    a claim, pausing and resuming). Otherwise :class:`~chronoq.OutcomeUnknown`
    is raised at once (and it is raised too when a call that is safe to resend
    lost its answer on the last node tried). When every node answered 503
    the last 503's error is raised; when none could be reached,
    :class:`~chronoq.ConnectionFailed`. With a single URL, each call is tried
    once: the client never waits and retries by itself (the
    :class:`~chronoq.Worker` does).

    Numbers given as durations are milliseconds; a :class:`datetime.timedelta`
    works everywhere too.
    """

    def __init__(
        self,
        url: Union[str, Sequence[str], None] = None,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        ssl_context: Optional[ssl.SSLContext] = None,
        ca_file: Optional[str] = None,
        _clock: Optional[Clock] = None,
    ) -> None:
        if url is None:
            url = os.environ.get("CHRONOQ_URL") or DEFAULT_URL
        if token is None:
            token = os.environ.get("CHRONOQ_TOKEN") or None
        if ca_file is not None:
            if ssl_context is not None:
                raise ValueError("give ca_file or ssl_context, not both")
            # Raises OSError (FileNotFoundError, ssl.SSLError) naming what is wrong.
            ssl_context = ssl.create_default_context(cafile=ca_file)
        self.urls: List[str] = parse_urls(url)
        self.timeout = timeout
        self._transport = Transport(self.urls, token, timeout, ssl_context)
        # The clock of the lease extensions of this client's workers and locks
        # (chronoq/_clock.py; a test's fake one, else real time). Not public.
        self._clock: Clock = _clock if _clock is not None else REAL

    # --- plumbing ---------------------------------------------------------------

    @property
    def current_url(self) -> str:
        """The node the next request goes to first."""
        return self._transport.current_url

    def close(self) -> None:
        """Closes the client's connections (it reconnects if used again)."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({','.join(self.urls)!r})"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        resend: bool = False,
        extra_timeout: float = 0.0,
        accept: Tuple[int, ...] = (),
    ) -> Any:
        """Sends one API request and returns its decoded JSON answer.

        ``path`` is the API path with its query (``/v1/tasks?queue=a``),
        already percent-encoded. ``resend`` marks a POST as safe to resend
        after a lost answer (see the class docstring). Errors are raised as
        :class:`~chronoq.ChronoqError` subclasses.
        """
        return self._send(Request(method, path, body, resend, extra_timeout, accept)).body

    def _send(self, req: Request) -> Answer:
        return self._transport.send(req)

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        resend: bool = False,
        extra_timeout: float = 0.0,
    ) -> Any:
        return self._send(Request(method, path, body, resend, extra_timeout)).body

    # --- tasks --------------------------------------------------------------------

    def enqueue(
        self,
        queue: str,
        payload: JSON = None,
        *,
        run_at: Optional[Time] = None,
        delay: Optional[Duration] = None,
        id: Optional[str] = None,
        on_conflict: Optional[str] = None,
        max_attempts: Optional[int] = None,
        priority: Optional[int] = None,
        backoff: Union[Backoff, Mapping[str, Any], None] = None,
        target: Union[Target, Mapping[str, Any], None] = None,
        key: Optional[str] = None,
    ) -> Task:
        """Enqueues one task (``POST /v1/tasks``) and returns it as stored.

        Args:
            queue: the queue's name.
            payload: any JSON value (default ``{}`` on the server).
            run_at: when it is due (aware datetime, RFC 3339 or epoch ms); or
            delay: due this long from now (timedelta or ms). Neither: now.
            id: a client-chosen id (1-200 bytes, not starting with ``_``).
            on_conflict: for an ``id`` naming an unfinished task: ``"reject"``
                (the default: :class:`~chronoq.Conflict`), ``"ignore"`` (the
                existing task is returned) or ``"replace"``.
            max_attempts, priority, backoff: per-task settings
                (:class:`~chronoq.Backoff` or ``{"base_ms", "cap_ms"}``).
            target: a webhook chronoqd delivers itself
                (:class:`~chronoq.Target` or its JSON object).
            key: the ordering key: a key's tasks start one after another.

        Resent to the next node after a lost answer only when ``id`` is
        given (the id dedupes it; with ``on_conflict="reject"`` a resend
        whose first sending was done answers :class:`~chronoq.Conflict`, so
        prefer ``"ignore"`` when retrying). Raises
        :class:`~chronoq.KeyBacklogFull` past the key's
        ``max_pending_per_key``.
        """
        spec = TaskSpec(
            queue, payload, run_at, delay, id, on_conflict, max_attempts, priority, backoff,
            target, key,
        )
        body = spec.to_json()
        return Task.from_json(self._call("POST", "/v1/tasks", body, resend=id is not None))

    def enqueue_many(
        self,
        tasks: Iterable[Union[TaskSpec, Mapping[str, Any]]],
        *,
        batch_size: int = MAX_BATCH,
    ) -> TaskList:
        """Enqueues many tasks (``POST /v1/tasks/batch``) and returns them
        (a :class:`~chronoq.TaskList`: each made a :class:`~chronoq.Task`
        when first read).

        Each request holds up to ``batch_size`` (at most 10,000) tasks and
        stays under chronoqd's 1 MiB body limit; a request is stored whole or
        not at all, but a list split into several requests is not: when one
        fails, the error's ``field`` and ``message`` name the task by its
        index in ``tasks`` and its ``stored`` attribute lists what the
        earlier requests stored. Items are :class:`~chronoq.TaskSpec` objects
        or ``POST /v1/tasks`` bodies (dicts). A request is resent after a lost
        answer only when every task of it has an ``id``.
        """
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH}")
        stored = TaskList()
        bodies: List[Dict[str, Any]] = []
        first_index = 0
        for item in tasks:
            body = item.to_json() if isinstance(item, TaskSpec) else item
            bodies.append(body if isinstance(body, dict) else dict(body))
            if len(bodies) == batch_size:
                self._enqueue_batch(bodies, first_index, stored)
                first_index += len(bodies)
                bodies = []
        if bodies:
            self._enqueue_batch(bodies, first_index, stored)
        return stored

    def _enqueue_batch(self, bodies: List[Dict[str, Any]], offset: int, stored: TaskList) -> None:
        """Sends ``bodies`` in one request, or, past chronoqd's body limit, in
        halves (recursively); ``offset`` is the index of the first in the
        caller's list, for errors."""
        data = _ENCODER.encode({"tasks": bodies}).encode()
        if len(data) > MAX_BODY and len(bodies) > 1:
            half = len(bodies) // 2
            self._enqueue_batch(bodies[:half], offset, stored)
            self._enqueue_batch(bodies[half:], offset + half, stored)
            return
        resend = all(isinstance(t.get("id"), str) for t in bodies)
        try:
            answer = self._send(
                Request("POST", "/v1/tasks/batch", data, resend, raw_answer=True)
            )
        except ChronoqError as e:
            if offset:

                def shift(m: "re.Match[str]") -> str:
                    return f"tasks[{int(m.group(1)) + offset}]"

                if e.field:
                    e.field = _BATCH_FIELD.sub(shift, e.field)
                e.message = _BATCH_FIELD.sub(shift, e.message)
                e.args = (e.message,)
            e.stored = list(stored)
            raise
        stored._add_answer(answer.body, len(bodies))

    def get(self, id: str, attempts: bool = False) -> Task:
        """Returns the task ``id`` (``GET /v1/tasks/{id}``); raises
        :class:`~chronoq.NotFound`. With ``attempts``, its ``attempts`` holds
        its last finished attempts (``?attempts=true``)."""
        query = "?attempts=true" if attempts else ""
        return Task.from_json(self._call("GET", f"/v1/tasks/{_seg(id)}{query}"))

    def cancel(self, id: str) -> Task:
        """Cancels a scheduled task (``DELETE /v1/tasks/{id}``) and returns it.

        Raises :class:`~chronoq.NotFound`, or
        :class:`~chronoq.FailedPrecondition` when it is running or finished.
        Resent after a lost answer (a resend of a done cancel answers
        :class:`~chronoq.FailedPrecondition`).
        """
        return Task.from_json(self._call("DELETE", f"/v1/tasks/{_seg(id)}"))

    def reschedule(
        self,
        id: str,
        *,
        run_at: Optional[Time] = None,
        delay: Optional[Duration] = None,
        payload: Union[JSON, _Unset] = UNSET,
    ) -> Task:
        """Gives a scheduled task a new due time, and optionally a new payload
        (``PATCH /v1/tasks/{id}``). Exactly one of ``run_at`` and ``delay``.
        Resent after a lost answer."""
        body: Dict[str, Any] = {}
        if (run_at is None) == (delay is None):
            raise ValueError("give run_at or delay (one of them)")
        if run_at is not None:
            body["run_at"] = format_time(run_at, "run_at")
        if delay is not None:
            body["delay_ms"] = to_millis(delay, "delay")
        if payload is not UNSET:
            body["payload"] = payload
        return Task.from_json(self._call("PATCH", f"/v1/tasks/{_seg(id)}", body))

    def retry(self, id: str) -> Task:
        """Schedules a dead task again, now, with its attempts reset
        (``POST /v1/tasks/{id}/retry``). Not resent after a lost answer."""
        return Task.from_json(self._call("POST", f"/v1/tasks/{_seg(id)}/retry"))

    def list_page(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        key: Optional[str] = None,
        limit: int = 100,
        cursor: Optional[str] = None,
    ) -> Page:
        """One page of tasks (``GET /v1/tasks``): ``limit`` 1-1000, and the
        ``next_cursor`` to pass back (``None`` on the last page)."""
        params: List[Tuple[str, str]] = []
        for name, value in (("queue", queue), ("state", state), ("key", key), ("cursor", cursor)):
            if value is not None:
                params.append((name, value))
        params.append(("limit", str(limit)))
        answer = self._call("GET", "/v1/tasks?" + urllib.parse.urlencode(params))
        return Page([Task.from_json(t) for t in answer.get("tasks", [])], answer.get("next_cursor"))

    def list(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        key: Optional[str] = None,
        page_size: int = 100,
    ) -> Iterator[Task]:
        """Iterates over every task matching the filters, fetching pages of
        ``page_size`` as it goes (``GET /v1/tasks``). ``state`` is
        ``scheduled``, ``running``, ``succeeded``, ``cancelled`` or ``dead``;
        ``key`` keeps one key's tasks."""
        cursor: Optional[str] = None
        while True:
            page = self.list_page(queue=queue, state=state, key=key, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # --- workers ------------------------------------------------------------------

    def claim(
        self,
        queue: str,
        *,
        max: int = 1,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        acks: Optional[Iterable[AckLike]] = None,
        worker: Optional[str] = None,
    ) -> ClaimResult:
        """Claims up to ``max`` due tasks of ``queue``
        (``POST /v1/queues/{queue}/claim``).

        Each is leased until ``lease`` (default 30 s) passes, with a fencing
        ``token``. With ``wait``, waits (a long poll, at most 1 h) until one
        is due and answers empty if none came. ``acks`` carries outcomes of
        earlier tasks (:class:`~chronoq.AckItem`, :class:`~chronoq.Lease` or
        ``(id, token)``); they are applied first and their results come back
        in :attr:`~chronoq.ClaimResult.acks`. If the claim raises anything
        but :class:`~chronoq.InvalidArgument`, send those outcomes again.
        ``worker`` names the claimer (at most 200 bytes, no control
        characters): each task claimed shows it as :attr:`~chronoq.Task.worker`.

        Resent after a lost answer: the tasks a lost claim leased are handed
        out again when their lease ends.
        """
        body: Dict[str, Any] = {"max": max}
        if lease is not None:
            body["lease_ms"] = to_millis(lease, "lease")
        wait_ms = 0
        if wait is not None:
            wait_ms = to_millis(wait, "wait")
            body["wait_ms"] = wait_ms
        items = [ack_item(a).to_json() for a in acks] if acks is not None else []
        if items:
            body["acks"] = items
        if worker:
            body["worker"] = worker
        answer = self._call(
            "POST", f"/v1/queues/{_seg(queue)}/claim", body, resend=True,
            extra_timeout=_seconds(wait_ms),
        )
        tasks = [Lease.from_json(t) for t in answer.get("tasks", [])]
        results = [AckResult.from_json(r) for r in answer.get("acks", [])]
        return ClaimResult(tasks, results)

    def ack(self, id: str, token: int) -> None:
        """Acknowledges a claimed task: it succeeded
        (``POST /v1/tasks/{id}/ack``). Raises :class:`~chronoq.StaleToken`
        when the lease is no longer the caller's. Resent after a lost answer
        (a resend of a done ack answers :class:`~chronoq.StaleToken`)."""
        self._call("POST", f"/v1/tasks/{_seg(id)}/ack", {"token": token}, resend=True)

    def fail(
        self,
        id: str,
        token: int,
        error: Optional[str] = None,
        *,
        retry_in: Optional[Duration] = None,
    ) -> None:
        """Fails a claimed task's attempt (``POST /v1/tasks/{id}/fail``): it
        retries after ``retry_in`` or its backoff, or goes dead after its last
        attempt, keeping ``error`` as ``last_error``. Raises
        :class:`~chronoq.StaleToken`. Resent after a lost answer."""
        body: Dict[str, Any] = {"token": token}
        if error is not None:
            body["error"] = error
        if retry_in is not None:
            body["retry_in_ms"] = to_millis(retry_in, "retry_in")
        self._call("POST", f"/v1/tasks/{_seg(id)}/fail", body, resend=True)

    def extend(self, id: str, token: int, lease: Duration) -> datetime:
        """Extends a claimed task's lease to ``lease`` from now
        (``POST /v1/tasks/{id}/extend``) and returns the new ``lease_until``.
        Raises :class:`~chronoq.StaleToken`. Resent after a lost answer."""
        body = {"token": token, "lease_ms": to_millis(lease, "lease")}
        answer = self._call("POST", f"/v1/tasks/{_seg(id)}/extend", body, resend=True)
        until = parse_time(answer.get("lease_until"))
        if until is None:
            raise InternalError(f"extend answer without lease_until: {answer!r}", code="bad_response")
        return until

    def ack_many(self, items: Iterable[AckLike]) -> List[AckResult]:
        """Reports many outcomes in one commit (``POST /v1/acks``) and returns
        one :class:`~chronoq.AckResult` per item, in order.

        Items are :class:`~chronoq.AckItem` (with ``error`` set it is a
        failure, retried after ``retry_in`` or the backoff),
        :class:`~chronoq.Lease` or ``(id, token)`` (successes). More than
        10,000 items go in several requests. Resent after a lost answer (a
        resend of a done item reports :class:`~chronoq.StaleToken`).
        """
        normalized = [ack_item(a).to_json() for a in items]
        results: List[AckResult] = []
        for start in range(0, len(normalized), MAX_BATCH):
            chunk = normalized[start : start + MAX_BATCH]
            answer = self._call("POST", "/v1/acks", {"acks": chunk}, resend=True)
            results.extend(AckResult.from_json(r) for r in answer.get("results", []))
        return results

    # --- queues -------------------------------------------------------------------

    def list_queues(self) -> List[QueueInfo]:
        """Every queue with its counts and settings (``GET /v1/queues``)."""
        answer = self._call("GET", "/v1/queues")
        return [QueueInfo.from_json(q) for q in answer.get("queues", [])]

    def get_queue(self, name: str) -> QueueInfo:
        """One queue (``GET /v1/queues/{queue}``)."""
        return QueueInfo.from_json(self._call("GET", f"/v1/queues/{_seg(name)}"))

    def configure_queue(
        self,
        name: str,
        *,
        concurrency: Union[int, None, _Unset] = UNSET,
        max_in_flight_per_key: Union[int, None, _Unset] = UNSET,
        max_pending_per_key: Union[int, None, _Unset] = UNSET,
        max_attempts: Union[int, None, _Unset] = UNSET,
        backoff: Union[Backoff, Mapping[str, Any], None, _Unset] = UNSET,
        retention: Union[Duration, None, _Unset] = UNSET,
        rate_limit: Union[RateLimit, Mapping[str, Any], None, _Unset] = UNSET,
    ) -> QueueInfo:
        """Changes a queue's settings (``PUT /v1/queues/{queue}``) and returns
        the queue. Settings left out keep their value; ``None`` puts one back
        to its default (no limit, or the engine's). ``concurrency`` is the
        queue's ``max_in_flight``. Resent after a lost answer."""
        body: Dict[str, Any] = {}
        if concurrency is not UNSET:
            body["concurrency"] = concurrency
        if max_in_flight_per_key is not UNSET:
            body["max_in_flight_per_key"] = max_in_flight_per_key
        if max_pending_per_key is not UNSET:
            body["max_pending_per_key"] = max_pending_per_key
        if max_attempts is not UNSET:
            body["max_attempts"] = max_attempts
        if backoff is not UNSET:
            body["backoff"] = _backoff_json(backoff)
        if retention is not UNSET:
            body["retention_ms"] = None if retention is None else to_millis(retention, "retention")
        if rate_limit is not UNSET:
            body["rate_limit"] = (
                None
                if rate_limit is None
                else rate_limit.to_json() if isinstance(rate_limit, RateLimit) else dict(rate_limit)
            )
        return QueueInfo.from_json(self._call("PUT", f"/v1/queues/{_seg(name)}", body))

    def pause_queue(self, name: str) -> QueueInfo:
        """Pauses a queue: claims get none of its tasks until resumed
        (``POST /v1/queues/{queue}/pause``). Resent after a lost answer."""
        path = f"/v1/queues/{_seg(name)}/pause"
        return QueueInfo.from_json(self._call("POST", path, resend=True))

    def resume_queue(self, name: str) -> QueueInfo:
        """Resumes a paused queue (``POST /v1/queues/{queue}/resume``).
        Resent after a lost answer."""
        path = f"/v1/queues/{_seg(name)}/resume"
        return QueueInfo.from_json(self._call("POST", path, resend=True))

    # --- schedules ----------------------------------------------------------------

    @staticmethod
    def _schedule_body(
        queue: str,
        cron: Optional[str],
        every: Optional[Duration],
        fixed_delay: Optional[Duration],
        options: Dict[str, Any],
    ) -> Dict[str, Any]:
        body: Dict[str, Any] = {"queue": queue}
        if cron is not None:
            body["cron"] = cron
        if every is not None:
            body["every_ms"] = to_millis(every, "every")
        if fixed_delay is not None:
            body["fixed_delay_ms"] = to_millis(fixed_delay, "fixed_delay")
        for name, value in options.items():
            if value is None:
                continue
            if name == "start":
                body["start"] = format_time(value, "start")
            elif name == "target":
                body["target"] = _target_json(value)
            else:
                body[name] = value
        return body

    def create_schedule(
        self,
        name: str,
        queue: str,
        *,
        cron: Optional[str] = None,
        every: Optional[Duration] = None,
        fixed_delay: Optional[Duration] = None,
        tz: Optional[str] = None,
        dst_gap: Optional[str] = None,
        dst_repeat: Optional[str] = None,
        start: Optional[Time] = None,
        payload: Optional[Mapping[str, Any]] = None,
        misfire: Optional[str] = None,
        max_catchup: Optional[int] = None,
        overlap: Optional[str] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        target: Union[Target, Mapping[str, Any], None] = None,
    ) -> Schedule:
        """Creates a schedule (``POST /v1/schedules``); raises
        :class:`~chronoq.Conflict` when the name is taken.

        Exactly one rule: ``cron`` (matched in ``tz``, default UTC; with
        ``dst_gap`` ``run_after``/``skip`` and ``dst_repeat`` ``once``/
        ``twice``), ``every`` (a fixed rate) or ``fixed_delay`` (after the
        previous run finished). ``misfire`` is ``skip``, ``run_once`` or
        ``run_all`` (with ``max_catchup``); ``overlap`` is ``allow``, ``skip``
        or ``queue_one``. ``payload`` must be an object. Resent after a lost
        answer (the name dedupes it; a resend whose first sending was done
        answers :class:`~chronoq.Conflict`).
        """
        options = dict(
            tz=tz, dst_gap=dst_gap, dst_repeat=dst_repeat, start=start, payload=payload,
            misfire=misfire, max_catchup=max_catchup, overlap=overlap, priority=priority,
            max_attempts=max_attempts, target=target,
        )
        body = self._schedule_body(queue, cron, every, fixed_delay, options)
        body["name"] = name
        return Schedule.from_json(self._call("POST", "/v1/schedules", body, resend=True))

    def put_schedule(
        self,
        name: str,
        queue: str,
        *,
        cron: Optional[str] = None,
        every: Optional[Duration] = None,
        fixed_delay: Optional[Duration] = None,
        tz: Optional[str] = None,
        dst_gap: Optional[str] = None,
        dst_repeat: Optional[str] = None,
        start: Optional[Time] = None,
        payload: Optional[Mapping[str, Any]] = None,
        misfire: Optional[str] = None,
        max_catchup: Optional[int] = None,
        overlap: Optional[str] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        target: Union[Target, Mapping[str, Any], None] = None,
    ) -> Schedule:
        """Creates or replaces the schedule ``name``
        (``PUT /v1/schedules/{name}``), with the arguments of
        :meth:`create_schedule`. The unclaimed next occurrence is dropped and
        the next one follows the new definition; a paused schedule stays
        paused. Resent after a lost answer."""
        options = dict(
            tz=tz, dst_gap=dst_gap, dst_repeat=dst_repeat, start=start, payload=payload,
            misfire=misfire, max_catchup=max_catchup, overlap=overlap, priority=priority,
            max_attempts=max_attempts, target=target,
        )
        body = self._schedule_body(queue, cron, every, fixed_delay, options)
        return Schedule.from_json(self._call("PUT", f"/v1/schedules/{_seg(name)}", body))

    def get_schedule(self, name: str) -> Schedule:
        """The schedule ``name`` (``GET /v1/schedules/{name}``); raises
        :class:`~chronoq.NotFound`."""
        return Schedule.from_json(self._call("GET", f"/v1/schedules/{_seg(name)}"))

    def list_schedules_page(
        self, *, queue: Optional[str] = None, limit: int = 100, cursor: Optional[str] = None
    ) -> Page:
        """One page of schedules by name (``GET /v1/schedules``)."""
        params: List[Tuple[str, str]] = []
        if queue is not None:
            params.append(("queue", queue))
        if cursor is not None:
            params.append(("cursor", cursor))
        params.append(("limit", str(limit)))
        answer = self._call("GET", "/v1/schedules?" + urllib.parse.urlencode(params))
        items = [Schedule.from_json(s) for s in answer.get("schedules", [])]
        return Page(items, answer.get("next_cursor"))

    def list_schedules(
        self, *, queue: Optional[str] = None, page_size: int = 100
    ) -> Iterator[Schedule]:
        """Iterates over every schedule (of ``queue``), by name, page by page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_schedules_page(queue=queue, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def delete_schedule(self, name: str) -> None:
        """Deletes a schedule and its unclaimed next occurrence
        (``DELETE /v1/schedules/{name}``); raises :class:`~chronoq.NotFound`.
        Resent after a lost answer (a resend of a done delete answers
        :class:`~chronoq.NotFound`)."""
        self._call("DELETE", f"/v1/schedules/{_seg(name)}")

    def pause_schedule(self, name: str) -> Schedule:
        """Pauses a schedule (``POST /v1/schedules/{name}/pause``). Resent
        after a lost answer."""
        path = f"/v1/schedules/{_seg(name)}/pause"
        return Schedule.from_json(self._call("POST", path, resend=True))

    def resume_schedule(self, name: str) -> Schedule:
        """Resumes a schedule (``POST /v1/schedules/{name}/resume``). Resent
        after a lost answer."""
        path = f"/v1/schedules/{_seg(name)}/resume"
        return Schedule.from_json(self._call("POST", path, resend=True))

    def next_occurrences(self, name: str, count: int = 10) -> List[datetime]:
        """The schedule's next ``count`` (1-1000) occurrences
        (``GET /v1/schedules/{name}/next``)."""
        answer = self._call("GET", f"/v1/schedules/{_seg(name)}/next?count={int(count)}")
        out: List[datetime] = []
        for t in answer.get("next", []):
            parsed = parse_time(t)
            if parsed is not None:
                out.append(parsed)
        return out

    # --- locks --------------------------------------------------------------------

    def lock(
        self,
        key: str,
        *,
        wait: Duration = 5000,
        lease: Duration = 30000,
        owner: Optional[str] = None,
        raise_if_lost: bool = True,
    ) -> Lock:
        """A keyed lock as a context manager::

            with client.lock("invoice:42", wait=timedelta(seconds=5)) as lk:
                write_invoice(42, fencing_token=lk.token)

        Entering acquires the lock (waiting up to ``wait``; ``0`` tries once;
        :class:`~chronoq.LockWaitTimeout` if it stayed held), a background
        thread extends the lease every third of ``lease`` while the block
        runs, and leaving releases it. If an extension is refused (the lease
        lapsed, say while the server could not be reached),
        :attr:`Lock.lost` becomes true, :meth:`Lock.check` raises, and leaving
        the block raises :class:`~chronoq.LockLost` (unless ``raise_if_lost``
        is false or the block raised an exception of its own).
        """
        return Lock(self, key, wait=wait, lease=lease, owner=owner, raise_if_lost=raise_if_lost)

    def acquire_lock(
        self,
        key: str,
        *,
        wait: Duration = 5000,
        lease: Duration = 30000,
        owner: Optional[str] = None,
    ) -> LockGrant:
        """Acquires the lock ``key`` (``POST /v1/locks/{key}/acquire``),
        waiting up to ``wait`` (``0``: try once), leased for ``lease``.
        Returns the grant with its fencing token; raises
        :class:`~chronoq.LockWaitTimeout` when it stayed held. Not resent
        after a lost answer (a lost grant would hold the lock until its lease
        ends): :class:`~chronoq.OutcomeUnknown` is raised instead."""
        wait_ms = to_millis(wait, "wait")
        body: Dict[str, Any] = {"wait_ms": wait_ms, "lease_ms": to_millis(lease, "lease")}
        if owner is not None:
            body["owner"] = owner
        answer = self._call(
            "POST", f"/v1/locks/{_seg(key)}/acquire", body, extra_timeout=_seconds(wait_ms)
        )
        return LockGrant.from_json(answer)

    def extend_lock(self, key: str, token: int, lease: Duration) -> LockGrant:
        """Extends a held lock's lease to ``lease`` from now
        (``POST /v1/locks/{key}/extend``); raises :class:`~chronoq.StaleToken`
        when the token is not the key's current grant. Resent after a lost
        answer."""
        body = {"token": token, "lease_ms": to_millis(lease, "lease")}
        return LockGrant.from_json(
            self._call("POST", f"/v1/locks/{_seg(key)}/extend", body, resend=True)
        )

    def release_lock(self, key: str, token: int) -> None:
        """Releases a held lock (``POST /v1/locks/{key}/release``); raises
        :class:`~chronoq.StaleToken` when the token is not the key's current
        grant. Resent after a lost answer (a resend of a done release answers
        :class:`~chronoq.StaleToken`)."""
        self._call("POST", f"/v1/locks/{_seg(key)}/release", {"token": token}, resend=True)

    def get_lock(self, key: str) -> LockInfo:
        """The lock's state (``GET /v1/locks/{key}``): held, owner, expiry,
        waiters."""
        return LockInfo.from_json(self._call("GET", f"/v1/locks/{_seg(key)}"))

    # --- operations ---------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """The current node's ``GET /healthz`` answer, also when it is 503
        (``{"status": "unavailable", "store": "down", ...}``); in cluster
        mode it has the node's ``role``. Moves to the next node only when one
        cannot be connected to."""
        answer = self._send(Request("GET", "/healthz", accept=(503,))).body
        return answer if isinstance(answer, dict) else {}

    def version(self) -> str:
        """chronoqd's version (``GET /v1/version``)."""
        return str(self._call("GET", "/v1/version").get("version"))

    def cluster(self) -> Dict[str, Any]:
        """The cluster's nodes and leader as the current node sees them
        (``GET /v1/cluster``; cluster mode only)."""
        answer = self._call("GET", "/v1/cluster")
        return answer if isinstance(answer, dict) else {}
