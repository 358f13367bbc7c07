"""Exceptions raised by the chronoq client.

Every error chronoqd answers is raised as an instance of :class:`ChronoqError`
(or one of its subclasses, chosen by the server's error ``code``), carrying the
server's ``code``, ``message`` and ``field`` and the HTTP ``status``. Errors the
client meets by itself (no node could be reached, an answer was lost) use the
same classes with ``status`` set to ``None``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Type


class ChronoqError(Exception):
    """Base class of every error of the chronoq client.

    Attributes:
        code: the server's error code (``"not_found"``, ``"stale_token"``, ...),
            or a client-side code (``"connection_failed"``, ``"outcome_unknown"``).
        message: the human-readable message.
        field: the request field the error is about (``"run_at"``,
            ``"tasks[3].key"``), or ``None``.
        status: the HTTP status of the answer, or ``None`` when no answer came.
        node: the URL of the node that answered (or failed), when known.
        stored: for :meth:`chronoq.Client.enqueue_many` split into several
            requests, the tasks the requests before the failing one stored
            (``None`` otherwise).
    """

    default_code = "unknown"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        field: Optional[str] = None,
        status: Optional[int] = None,
        node: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.code: str = code if code is not None else self.default_code
        self.message: str = message
        self.field: Optional[str] = field
        self.status: Optional[int] = status
        self.node: Optional[str] = node
        self.stored: Optional[List[Any]] = None

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.field:
            text += f" (field {self.field})"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"field={self.field!r}, status={self.status!r})"
        )


class InvalidArgument(ChronoqError):
    """400 ``invalid_argument``: malformed JSON, a wrong type, a value out of
    range or an unknown field; ``field`` names it (``tasks[3].run_at``)."""

    default_code = "invalid_argument"


class Unauthorized(ChronoqError):
    """401 ``unauthorized``: the bearer token is missing or wrong."""

    default_code = "unauthorized"


class NotFound(ChronoqError):
    """404 ``not_found``: no such task, queue, schedule or endpoint."""

    default_code = "not_found"


class MethodNotAllowed(ChronoqError):
    """405 ``method_not_allowed``: the path exists, the method does not."""

    default_code = "method_not_allowed"


class Conflict(ChronoqError):
    """409 ``conflict``: a client-chosen task id names an unfinished task
    (``on_conflict="reject"``), or a new schedule's name is taken."""

    default_code = "conflict"


class FailedPrecondition(ChronoqError):
    """409 ``failed_precondition``: the task is in the wrong state (cancelling
    a running task, retrying a live one)."""

    default_code = "failed_precondition"


class StaleToken(ChronoqError):
    """409 ``stale_token``: the lease or lock is no longer the caller's (it
    lapsed, the task was redelivered, or the lock was released or moved on)."""

    default_code = "stale_token"


class LockLost(StaleToken):
    """Raised when leaving a :meth:`chronoq.Client.lock` block whose lease was
    lost while the block ran (an extension was refused with ``stale_token``):
    another holder may have had the lock meanwhile."""

    default_code = "stale_token"


class LockWaitTimeout(ChronoqError):
    """409 ``lock_wait_timeout``: the lock stayed held by another for the whole
    wait (at once for a wait of 0); ``field`` is ``wait_ms``."""

    default_code = "lock_wait_timeout"


class PayloadTooLarge(ChronoqError):
    """413 ``payload_too_large``: the request body is over 1 MiB."""

    default_code = "payload_too_large"


class KeyBacklogFull(ChronoqError):
    """429 ``key_backlog_full``: the task's key already has the queue's
    ``max_pending_per_key`` tasks waiting to start; ``field`` is ``key`` (or
    ``tasks[i].key``). Retry once some have started, or raise the limit."""

    default_code = "key_backlog_full"


class RequestHeaderFieldsTooLarge(ChronoqError):
    """431 ``request_header_fields_too_large``: headers over 16 KiB."""

    default_code = "request_header_fields_too_large"


class InternalError(ChronoqError):
    """500 (``internal``, ``data_loss``) or any answer the client does not
    understand (``code`` ``"bad_response"``)."""

    default_code = "internal"


class Unavailable(ChronoqError):
    """503 ``unavailable``: chronoqd is stopping or its disk failed; retry.

    The base class of every "retry later" error: :class:`NotLeader`,
    :class:`LeaderUnavailable`, :class:`StoreUnavailable` and the client's own
    :class:`ConnectionFailed`. A call that raises one of these was not done
    (for ``not_leader`` and ``store_unavailable``: or, rarely, cannot be known
    to be done; a client-chosen task id makes a retried enqueue safe).
    """

    default_code = "unavailable"


class NotLeader(Unavailable):
    """503 ``not_leader`` (cluster): the node no longer leads, or no node
    leads right now (a failover is under way)."""

    default_code = "not_leader"


class LeaderUnavailable(Unavailable):
    """503 ``leader_unavailable`` (cluster): a standby could not reach the
    leader to forward the call."""

    default_code = "leader_unavailable"


class StoreUnavailable(Unavailable):
    """503 ``store_unavailable``: the PostgreSQL store cannot be reached."""

    default_code = "store_unavailable"


class ConnectionFailed(Unavailable):
    """No node could be connected to (refused, timed out while connecting,
    name not resolved). Nothing was sent, so nothing was done; ``message``
    says what each node did."""

    default_code = "connection_failed"


class OutcomeUnknown(ChronoqError):
    """The request was sent in full but its answer was lost (the connection
    broke or the timeout passed): it may or may not have been done. A call
    that is not safe to resend was sent to no other node; one that is safe
    (see :class:`~chronoq.Client`) was tried on every node and lost its
    answer on the last, and may simply be called again."""

    default_code = "outcome_unknown"


class LeaderTimeout(OutcomeUnknown):
    """504 ``leader_timeout`` (cluster): the leader did not answer a forwarded
    call in time; whether it was done is unknown."""

    default_code = "leader_timeout"


#: The exception class for each error code chronoqd sends.
ERROR_CLASSES: Dict[str, Type[ChronoqError]] = {
    "invalid_argument": InvalidArgument,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "already_exists": Conflict,
    "failed_precondition": FailedPrecondition,
    "aborted": FailedPrecondition,
    "stale_token": StaleToken,
    "lock_wait_timeout": LockWaitTimeout,
    "payload_too_large": PayloadTooLarge,
    "key_backlog_full": KeyBacklogFull,
    "resource_exhausted": KeyBacklogFull,
    "request_header_fields_too_large": RequestHeaderFieldsTooLarge,
    "unavailable": Unavailable,
    "not_leader": NotLeader,
    "leader_unavailable": LeaderUnavailable,
    "store_unavailable": StoreUnavailable,
    "leader_timeout": LeaderTimeout,
    "deadline_exceeded": Unavailable,
    "internal": InternalError,
    "data_loss": InternalError,
}

# The class for a status when the code is unknown (a newer server's code).
_BY_STATUS: Dict[int, Type[ChronoqError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    409: FailedPrecondition,
    413: PayloadTooLarge,
    429: KeyBacklogFull,
    431: RequestHeaderFieldsTooLarge,
    503: Unavailable,
    504: LeaderTimeout,
}


def error_from_json(
    error: Any, status: Optional[int] = None, node: Optional[str] = None
) -> ChronoqError:
    """Builds the exception for an error object ``{"code","message","field"}``
    (the ``error`` member of an answer, or of an acknowledgement's result).

    The class is chosen by ``code``; an unknown code falls back on the HTTP
    status, then on :class:`ChronoqError` itself.
    """
    if not isinstance(error, dict):
        error = {}
    code = error.get("code")
    message = error.get("message")
    field = error.get("field")
    code_s = code if isinstance(code, str) else None
    cls: Type[ChronoqError] = ChronoqError
    if code_s is not None and code_s in ERROR_CLASSES:
        cls = ERROR_CLASSES[code_s]
    elif status is not None:
        cls = _BY_STATUS.get(status, InternalError if status >= 500 else ChronoqError)
    return cls(
        message if isinstance(message, str) else (code_s or f"HTTP {status}"),
        code=code_s,
        field=field if isinstance(field, str) else None,
        status=status,
        node=node,
    )
