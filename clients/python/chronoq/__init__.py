"""chronoq: a Python client for chronoqd, the durable timed-task engine.

::

    from chronoq import Client, Worker

    client = Client("http://127.0.0.1:7070")
    client.enqueue("emails", {"to": "a@example.com"}, delay=timedelta(minutes=10))

Standard library only. See README.md for the worker, locks and errors.
"""

from .aio import AsyncClient, AsyncLock, AsyncWorker
from .client import UNSET, Client
from .errors import (
    ChronoqError,
    Conflict,
    ConnectionFailed,
    FailedPrecondition,
    InternalError,
    InvalidArgument,
    KeyBacklogFull,
    LeaderTimeout,
    LeaderUnavailable,
    LockLost,
    LockWaitTimeout,
    MethodNotAllowed,
    NotFound,
    NotLeader,
    OutcomeUnknown,
    PayloadTooLarge,
    RequestHeaderFieldsTooLarge,
    StaleToken,
    StoreUnavailable,
    Unauthorized,
    Unavailable,
    error_from_json,
)
from .lock import Lock
from .models import (
    AckItem,
    AckResult,
    Attempt,
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
)
from .worker import RetryLater, Worker, WorkerStats, error_text

__version__ = "0.1.0"

__all__ = [
    "AckItem",
    "AckResult",
    "AsyncClient",
    "Attempt",
    "AsyncLock",
    "AsyncWorker",
    "Backoff",
    "ChronoqError",
    "ClaimResult",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Duration",
    "FailedPrecondition",
    "InternalError",
    "InvalidArgument",
    "KeyBacklogFull",
    "LeaderTimeout",
    "LeaderUnavailable",
    "Lease",
    "Lock",
    "LockGrant",
    "LockInfo",
    "LockLost",
    "LockWaitTimeout",
    "MethodNotAllowed",
    "NotFound",
    "NotLeader",
    "OutcomeUnknown",
    "Page",
    "PayloadTooLarge",
    "QueueInfo",
    "RateLimit",
    "RequestHeaderFieldsTooLarge",
    "RetryLater",
    "Schedule",
    "StaleToken",
    "StoreUnavailable",
    "Target",
    "Task",
    "TaskList",
    "TaskSpec",
    "Time",
    "UNSET",
    "Unauthorized",
    "Unavailable",
    "Worker",
    "WorkerStats",
    "error_from_json",
    "error_text",
    "__version__",
]
