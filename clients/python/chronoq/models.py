"""The objects the chronoq client returns and takes.

Answers are parsed into frozen dataclasses; each keeps the server's JSON in
``raw`` so that fields added by a newer chronoqd stay reachable. Times are
timezone-aware :class:`datetime.datetime` objects in UTC.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

from .errors import ChronoqError, InternalError, error_from_json

#: A point in time: an aware :class:`~datetime.datetime`, an RFC 3339 string
#: (``"2026-11-22T03:00:00Z"``) or integer epoch milliseconds.
Time = Union[datetime, str, int]

#: A span of time: a :class:`~datetime.timedelta`, or a number of
#: milliseconds (``30000`` is 30 s).
Duration = Union[timedelta, int, float]

JSON = Any


def to_millis(value: Duration, name: str) -> int:
    """Converts a :data:`Duration` to whole milliseconds (rounding)."""
    if isinstance(value, timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a timedelta or milliseconds, got {value!r}")
    return round(value)


def format_time(value: Time, name: str) -> Union[str, int]:
    """Converts a :data:`Time` to what the API accepts (RFC 3339 or epoch ms).

    A naive datetime is refused: chronoq cannot know which zone it means.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name}: a naive datetime is ambiguous; give it a tzinfo")
        utc = value.astimezone(timezone.utc)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond:06d}Z"
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a datetime, an RFC 3339 string or epoch ms")
    if isinstance(value, (str, int)):
        return value
    raise TypeError(f"{name}: expected a datetime, an RFC 3339 string or epoch ms")


#: Whether datetime.fromisoformat reads RFC 3339 as chronoqd writes it
#: ("Z", any number of fractional digits): Python 3.11 and later.
_FROMISOFORMAT_TAKES_RFC3339 = sys.version_info >= (3, 11)


def parse_time(value: Any) -> Optional[datetime]:
    """Parses an RFC 3339 time of an answer (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    if not isinstance(value, str):
        raise InternalError(f"not a time: {value!r}", code="bad_response")
    if _FROMISOFORMAT_TAKES_RFC3339 and value.endswith("Z"):
        # The fast path (Python >= 3.11), for chronoqd's own "...123Z".
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # fromisoformat before 3.11 takes only 3 or 6 fractional digits.
    if "." in text:
        head, _, rest = text.partition(".")
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        text = f"{head}.{(digits + '000000')[:6]}{rest}"
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except ValueError:
        raise InternalError(f"not an RFC 3339 time: {value!r}", code="bad_response") from None


def _opt_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _object(value: Any, what: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise InternalError(f"{what}: expected a JSON object, got {value!r}", code="bad_response")
    return value


@dataclass(frozen=True)
class Backoff:
    """A retry backoff: the first delay ``base`` doubles up to ``cap``
    (full jitter). Numbers are milliseconds."""

    base: Duration
    cap: Optional[Duration] = None

    def to_json(self) -> Dict[str, int]:
        out = {"base_ms": to_millis(self.base, "backoff.base_ms")}
        if self.cap is not None:
            out["cap_ms"] = to_millis(self.cap, "backoff.cap_ms")
        return out


@dataclass(frozen=True)
class Target:
    """A webhook: chronoqd itself delivers the task's payload to ``url`` when
    it is due (``method`` POST by default, a 2xx within ``timeout``
    acknowledges it)."""

    url: str
    method: Optional[str] = None
    headers: Optional[Mapping[str, str]] = None
    timeout: Optional[Duration] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"url": self.url}
        if self.method is not None:
            out["method"] = self.method
        if self.headers is not None:
            out["headers"] = dict(self.headers)
        if self.timeout is not None:
            out["timeout_ms"] = to_millis(self.timeout, "target.timeout_ms")
        return out


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` claims of a queue's tasks per sliding ``period``."""

    count: int
    period: Duration

    def to_json(self) -> Dict[str, int]:
        return {"count": self.count, "period_ms": to_millis(self.period, "rate_limit.period_ms")}


@dataclass(frozen=True)
class Attempt:
    """One finished attempt of a task (``Client.get(id, attempts=True)``)."""

    #: the task's attempt number at that claim (1 again after a retry by hand)
    attempt: int
    started_at: Optional[datetime]
    ended_at: Optional[datetime]
    duration_ms: int
    #: the chronoqd that granted the claim (its ``--node-id``), None when it has none
    node: Optional[str]
    #: ``succeeded``, ``failed`` or ``lease_expired``
    outcome: str
    worker: Optional[str] = None
    #: the failure's error, or the webhook response given with it (first 1,024 bytes each)
    error: Optional[str] = None
    response: Optional[str] = None

    @classmethod
    def from_json(cls, value: Any) -> "Attempt":
        o = _object(value, "attempt")
        return cls(
            attempt=_opt_int(o.get("attempt")) or 0,
            started_at=parse_time(o.get("started_at")),
            ended_at=parse_time(o.get("ended_at")),
            duration_ms=_opt_int(o.get("duration_ms")) or 0,
            node=_opt_str(o.get("node")),
            outcome=_opt_str(o.get("outcome")) or "",
            worker=_opt_str(o.get("worker")),
            error=_opt_str(o.get("error")),
            response=_opt_str(o.get("response")),
        )


@dataclass(frozen=True)
class Task:
    """A task as chronoqd shows it (``GET /v1/tasks/{id}``)."""

    id: str
    queue: str
    payload: JSON = None
    key: Optional[str] = None
    state: str = "scheduled"
    run_at: Optional[datetime] = None
    attempt: int = 0
    max_attempts: Optional[int] = None
    priority: int = 0
    last_error: Optional[str] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    lease_until: Optional[datetime] = None
    target: Optional[Dict[str, Any]] = None
    last_response: Optional[str] = None
    #: who holds the task's lease or last held it (the ``worker`` of the claim)
    worker: Optional[str] = None
    #: its last finished attempts, oldest first; only from ``get(id, attempts=True)``
    attempts: Optional[List[Attempt]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _fields_from_json(cls, value: Any) -> Dict[str, Any]:
        o = _object(value, "task")
        if not isinstance(o.get("id"), str) or not isinstance(o.get("queue"), str):
            raise InternalError(f"task without id or queue: {o!r}", code="bad_response")
        target = o.get("target")
        attempts = o.get("attempts")
        return dict(
            id=o["id"],
            queue=o["queue"],
            payload=o.get("payload"),
            key=_opt_str(o.get("key")),
            state=_opt_str(o.get("state")) or "running",
            run_at=parse_time(o.get("run_at")),
            attempt=_opt_int(o.get("attempt")) or 0,
            max_attempts=_opt_int(o.get("max_attempts")),
            priority=_opt_int(o.get("priority")) or 0,
            last_error=_opt_str(o.get("last_error")),
            created_at=parse_time(o.get("created_at")),
            updated_at=parse_time(o.get("updated_at")),
            lease_until=parse_time(o.get("lease_until")),
            target=target if isinstance(target, dict) else None,
            last_response=_opt_str(o.get("last_response")),
            worker=_opt_str(o.get("worker")),
            attempts=[Attempt.from_json(a) for a in attempts] if isinstance(attempts, list) else None,
            raw=o,
        )

    @classmethod
    def from_json(cls, value: Any) -> "Task":
        """Builds a task from its JSON object."""
        return cls(**cls._fields_from_json(value))


class TaskList(Sequence[Task]):
    """Tasks as chronoqd answered a batch of enqueues
    (:meth:`chronoq.Client.enqueue_many`). An answer is decoded when one of
    its tasks is first read, and a task made a :class:`Task` then: a batch of
    100,000 does not pay for 100,000 objects nobody reads (decoding them took
    longer than chronoqd took to store them). ``ids`` lists their ids. An
    answer that is not what chronoqd sends raises
    :class:`~chronoq.InternalError` when it is read.
    """

    __slots__ = ("_chunks", "_starts", "_built")

    def __init__(self) -> None:
        # Per answer: its body (bytes until decoded, then its tasks) and its
        # number of tasks; _starts[i] is the index of chunk i's first task.
        self._chunks: List[List[Any]] = []
        self._starts: List[int] = [0]
        self._built: Dict[int, Task] = {}

    def _add_answer(self, body: bytes, count: int) -> None:
        """Adds the body of a ``POST /v1/tasks/batch`` answer for ``count`` tasks."""
        self._chunks.append([body, count])
        self._starts.append(self._starts[-1] + count)

    def _raw(self, chunk: int) -> List[Dict[str, Any]]:
        body, count = self._chunks[chunk]
        if isinstance(body, (bytes, bytearray)):
            try:
                tasks = json.loads(body).get("tasks")
            except (ValueError, AttributeError):
                tasks = None
            if not isinstance(tasks, list) or len(tasks) != count:
                raise InternalError(
                    f"a batch answer without its {count} tasks: {bytes(body[:200])!r}",
                    code="bad_response",
                )
            for o in tasks:
                if not isinstance(o, dict) or not isinstance(o.get("id"), str):
                    raise InternalError(f"task without id: {o!r}", code="bad_response")
            self._chunks[chunk][0] = body = tasks
        return body  # type: ignore[no-any-return]

    @property
    def ids(self) -> List[str]:
        """The tasks' ids, in order."""
        return [o["id"] for chunk in range(len(self._chunks)) for o in self._raw(chunk)]

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, index: int) -> Task: ...

    @overload
    def __getitem__(self, index: slice) -> List[Task]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Task, List[Task]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("TaskList index out of range")
        task = self._built.get(index)
        if task is None:
            chunk = bisect.bisect_right(self._starts, index) - 1
            raw = self._raw(chunk)[index - self._starts[chunk]]
            task = self._built[index] = Task.from_json(raw)
        return task

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (TaskList, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TaskList({len(self)} tasks)"


@dataclass(frozen=True)
class Lease(Task):
    """A claimed task: a :class:`Task` leased to the caller until
    ``lease_until``, with the fencing ``token`` that acknowledges, fails or
    extends it."""

    token: int = 0

    @classmethod
    def from_json(cls, value: Any) -> "Lease":
        fields = cls._fields_from_json(value)
        token = _opt_int(fields["raw"].get("token"))
        if token is None:
            raise InternalError(f"lease without a token: {value!r}", code="bad_response")
        return cls(**fields, token=token)


@dataclass(frozen=True)
class AckItem:
    """One outcome for ``POST /v1/acks`` or a claim's ``acks``.

    Without ``error`` it acknowledges the task (it succeeded); with ``error``
    it fails the attempt, which retries after ``retry_in`` (or the backoff) or
    goes dead after the last attempt. ``retry_in`` goes only with ``error``.
    """

    id: str
    token: int
    error: Optional[str] = None
    retry_in: Optional[Duration] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"id": self.id, "token": self.token}
        if self.error is not None:
            out["error"] = self.error
            if self.retry_in is not None:
                out["retry_in_ms"] = to_millis(self.retry_in, "retry_in_ms")
        elif self.retry_in is not None:
            raise ValueError("retry_in goes only with error")
        return out

    @property
    def is_failure(self) -> bool:
        """True when this item fails the task rather than acknowledging it."""
        return self.error is not None


#: What :meth:`chronoq.Client.ack_many` takes: an :class:`AckItem`, a
#: :class:`Lease` (acknowledged) or an ``(id, token)`` pair.
AckLike = Union[AckItem, Lease, Tuple[str, int]]


def ack_item(value: Any) -> AckItem:
    """Normalizes an :data:`AckLike` to an :class:`AckItem`."""
    if isinstance(value, AckItem):
        return value
    if isinstance(value, Lease):
        return AckItem(value.id, value.token)
    if isinstance(value, tuple) and len(value) == 2:
        return AckItem(str(value[0]), int(value[1]))
    raise TypeError(f"not an acknowledgement: {value!r} (give an AckItem, a Lease or (id, token))")


@dataclass(frozen=True)
class AckResult:
    """The outcome of one acknowledgement: ``ok``, or the ``error`` (a
    :class:`~chronoq.ChronoqError`, e.g. :class:`~chronoq.StaleToken` when the
    lease was no longer the caller's)."""

    id: str
    ok: bool
    error: Optional[ChronoqError] = None

    @classmethod
    def from_json(cls, value: Any) -> "AckResult":
        o = _object(value, "ack result")
        ok = o.get("ok") is True
        return cls(
            id=str(o.get("id")),
            ok=ok,
            error=None if ok else error_from_json(o.get("error")),
        )


@dataclass(frozen=True)
class ClaimResult:
    """The answer of a claim: the leased ``tasks`` and, when the claim carried
    acknowledgements, their results in ``acks``. Iterating it (or ``len``)
    goes over the tasks."""

    tasks: List[Lease]
    acks: List[AckResult] = field(default_factory=list)

    def __iter__(self) -> Iterator[Lease]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __bool__(self) -> bool:
        return bool(self.tasks)


@dataclass(frozen=True)
class QueueInfo:
    """A queue's counts and settings (``GET /v1/queues/{queue}``); settings are
    ``None`` when the engine's default applies."""

    name: str
    counts: Dict[str, int]
    paused: bool
    webhooks: bool = False
    oldest_due_lateness_ms: Optional[int] = None
    concurrency: Optional[int] = None
    max_in_flight_per_key: Optional[int] = None
    max_pending_per_key: Optional[int] = None
    max_attempts: Optional[int] = None
    backoff: Optional[Dict[str, Any]] = None
    retention_ms: Optional[int] = None
    rate_limit: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def max_in_flight(self) -> Optional[int]:
        """Another name for :attr:`concurrency`."""
        return self.concurrency

    @classmethod
    def from_json(cls, value: Any) -> "QueueInfo":
        o = _object(value, "queue")
        counts = o.get("counts")
        backoff = o.get("backoff")
        rate = o.get("rate_limit")
        return cls(
            name=str(o.get("name")),
            counts={str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {},
            paused=o.get("paused") is True,
            webhooks=o.get("webhooks") is True,
            oldest_due_lateness_ms=_opt_int(o.get("oldest_due_lateness_ms")),
            concurrency=_opt_int(o.get("concurrency")),
            max_in_flight_per_key=_opt_int(o.get("max_in_flight_per_key")),
            max_pending_per_key=_opt_int(o.get("max_pending_per_key")),
            max_attempts=_opt_int(o.get("max_attempts")),
            backoff=backoff if isinstance(backoff, dict) else None,
            retention_ms=_opt_int(o.get("retention_ms")),
            rate_limit=rate if isinstance(rate, dict) else None,
            raw=o,
        )


@dataclass(frozen=True)
class Schedule:
    """A schedule (``GET /v1/schedules/{name}``): exactly one of ``cron``,
    ``every_ms`` and ``fixed_delay_ms`` is set."""

    name: str
    queue: str
    cron: Optional[str] = None
    every_ms: Optional[int] = None
    fixed_delay_ms: Optional[int] = None
    tz: Optional[str] = None
    start: Optional[datetime] = None
    payload: JSON = None
    misfire: Optional[str] = None
    max_catchup: Optional[int] = None
    overlap: Optional[str] = None
    dst_gap: Optional[str] = None
    dst_repeat: Optional[str] = None
    priority: int = 0
    max_attempts: Optional[int] = None
    target: Optional[Dict[str, Any]] = None
    paused: bool = False
    next_run: Optional[datetime] = None
    next_task_id: Optional[str] = None
    last_run: Optional[Dict[str, Any]] = None
    runs: int = 0
    skipped: int = 0
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> "Schedule":
        o = _object(value, "schedule")
        target, last_run = o.get("target"), o.get("last_run")
        return cls(
            name=str(o.get("name")),
            queue=str(o.get("queue")),
            cron=_opt_str(o.get("cron")),
            every_ms=_opt_int(o.get("every_ms")),
            fixed_delay_ms=_opt_int(o.get("fixed_delay_ms")),
            tz=_opt_str(o.get("tz")),
            start=parse_time(o.get("start")),
            payload=o.get("payload"),
            misfire=_opt_str(o.get("misfire")),
            max_catchup=_opt_int(o.get("max_catchup")),
            overlap=_opt_str(o.get("overlap")),
            dst_gap=_opt_str(o.get("dst_gap")),
            dst_repeat=_opt_str(o.get("dst_repeat")),
            priority=_opt_int(o.get("priority")) or 0,
            max_attempts=_opt_int(o.get("max_attempts")),
            target=target if isinstance(target, dict) else None,
            paused=o.get("paused") is True,
            next_run=parse_time(o.get("next_run")),
            next_task_id=_opt_str(o.get("next_task_id")),
            last_run=last_run if isinstance(last_run, dict) else None,
            runs=_opt_int(o.get("runs")) or 0,
            skipped=_opt_int(o.get("skipped")) or 0,
            created_at=parse_time(o.get("created_at")),
            updated_at=parse_time(o.get("updated_at")),
            raw=o,
        )


@dataclass(frozen=True)
class LockGrant:
    """A held lock: its fencing ``token`` (larger than any earlier grant's)
    and when its lease ends."""

    key: str
    token: int
    expires_at: Optional[datetime]

    @classmethod
    def from_json(cls, value: Any) -> "LockGrant":
        o = _object(value, "lock grant")
        token = _opt_int(o.get("token"))
        if token is None:
            raise InternalError(f"lock grant without a token: {o!r}", code="bad_response")
        return cls(key=str(o.get("key")), token=token, expires_at=parse_time(o.get("expires_at")))


@dataclass(frozen=True)
class LockInfo:
    """A lock's state (``GET /v1/locks/{key}``)."""

    key: str
    held: bool
    owner: Optional[str]
    expires_at: Optional[datetime]
    waiters: int

    @classmethod
    def from_json(cls, value: Any) -> "LockInfo":
        o = _object(value, "lock")
        return cls(
            key=str(o.get("key")),
            held=o.get("held") is True,
            owner=_opt_str(o.get("owner")),
            expires_at=parse_time(o.get("expires_at")),
            waiters=_opt_int(o.get("waiters")) or 0,
        )


@dataclass(frozen=True)
class Page:
    """One page of a listing and the cursor of the next (``None`` on the last)."""

    items: List[Any]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class TaskSpec:
    """A task to enqueue, for :meth:`chronoq.Client.enqueue_many` (the same
    fields as :meth:`chronoq.Client.enqueue`)."""

    queue: str
    payload: JSON = None
    run_at: Optional[Time] = None
    delay: Optional[Duration] = None
    id: Optional[str] = None
    on_conflict: Optional[str] = None
    max_attempts: Optional[int] = None
    priority: Optional[int] = None
    backoff: Optional[Union[Backoff, Mapping[str, Any]]] = None
    target: Optional[Union[Target, Mapping[str, Any]]] = None
    key: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        """The ``POST /v1/tasks`` body of this task."""
        body: Dict[str, Any] = {"queue": self.queue}
        if self.payload is not None:
            body["payload"] = self.payload
        if self.run_at is not None and self.delay is not None:
            raise ValueError("give run_at or delay, not both")
        if self.run_at is not None:
            body["run_at"] = format_time(self.run_at, "run_at")
        if self.delay is not None:
            body["delay_ms"] = to_millis(self.delay, "delay")
        for name in ("id", "on_conflict", "max_attempts", "priority", "key"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.backoff is not None:
            body["backoff"] = (
                self.backoff.to_json() if isinstance(self.backoff, Backoff) else dict(self.backoff)
            )
        if self.target is not None:
            body["target"] = (
                self.target.to_json() if isinstance(self.target, Target) else dict(self.target)
            )
        return body

    def replace(self, **changes: Any) -> "TaskSpec":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)
