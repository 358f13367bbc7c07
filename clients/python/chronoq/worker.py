"""Workers: claim tasks of queues and run Python functions on them."""

from __future__ import annotations

import logging
import os
import queue as queue_mod
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

from .client import MAX_BATCH, Client
from .errors import ChronoqError, InvalidArgument, OutcomeUnknown, StaleToken, Unavailable
from .models import AckItem, AckResult, Duration, Lease, to_millis

log = logging.getLogger("chronoq.worker")

#: A handler: called with one claimed task; returning acknowledges it, an
#: exception fails it.
Handler = Callable[[Lease], Any]
#: A batch handler: called with a list of claimed tasks; see
#: :meth:`Worker.batch_handler` for what it returns.
BatchHandler = Callable[[List[Lease]], Any]
F = TypeVar("F", bound=Callable[..., Any])

_ERROR_LIMIT = 4000  # chronoqd keeps 4,096 bytes of an error
_WORKER_NAME_LIMIT = 200  # chronoqd's limit on a claim's worker name, in bytes


def default_worker_name() -> str:
    """``<hostname>:<pid>``, cut to chronoqd's 200 bytes (on a UTF-8
    character boundary, keeping the pid)."""
    suffix = f":{os.getpid()}"
    host = socket.gethostname().encode("utf-8", "replace")[: _WORKER_NAME_LIMIT - len(suffix)]
    return host.decode("utf-8", "ignore") + suffix


class RetryLater(Exception):
    """Raise from a handler to fail the attempt with this message and retry
    after ``delay`` (timedelta or ms) instead of the task's backoff; without
    ``delay`` the backoff applies. No traceback is recorded."""

    def __init__(self, message: str = "retry requested", *, delay: Optional[Duration] = None):
        super().__init__(message)
        self.delay = delay


def error_text(exc: BaseException, lines: int = 12) -> str:
    """The last ``lines`` lines of the exception's traceback (ending with
    ``ValueError: message``), cut to chronoqd's 4 KiB from the end."""
    if isinstance(exc, RetryLater):
        return str(exc)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    kept = "\n".join(text.splitlines()[-lines:])
    data = kept.encode()
    if len(data) > _ERROR_LIMIT:
        kept = "..." + data[-_ERROR_LIMIT:].decode("utf-8", "ignore")
    return kept


@dataclass
class WorkerStats:
    """Counters of a worker (read them any time; they only grow)."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    #: requests that reported outcomes: POST /v1/acks and claims with acks
    ack_requests: int = 0
    extensions: int = 0
    leases_lost: int = 0
    #: outcomes chronoqd refused (the lease was no longer ours)
    refused: int = 0


@dataclass
class _Registration:
    queue: str
    fn: Callable[..., Any]
    batch: bool
    max: int
    concurrency: int
    #: tasks (batches) claimed and not finished, at most concurrency + prefetch
    limit: int
    lease_ms: int
    wait_ms: int
    #: notified when ``running`` drops (the queue's claiming thread waits on it)
    room: threading.Condition
    running: int = 0
    work: "queue_mod.Queue[Optional[List[Lease]]]" = field(default_factory=queue_mod.Queue)
    threads: List[threading.Thread] = field(default_factory=list)


@dataclass
class _Tracked:
    lease: Lease
    lease_ms: int
    next_at: float


class Worker:
    """Runs handlers on the tasks of one or more queues.

    ::

        worker = Worker(Client("http://127.0.0.1:7070"), concurrency=8)

        @worker.handler("emails")
        def send(task: Lease) -> None:
            send_email(**task.payload)

        worker.run()      # until SIGTERM or SIGINT

    Args:
        client: the :class:`~chronoq.Client` to talk through.
        concurrency: handlers running at once per queue (threads), unless a
            registration says otherwise; for a batch handler, batches.
        lease: each claim's lease (timedelta or ms; default 30 s). While a
            handler runs, its lease is extended every third of it.
        wait: how long a claim waits for a task (a long poll; default 5 s).
            A stop waits for the claim in flight, so it takes up to this long.
        prefetch: tasks a claim may take beyond the free handler threads,
            to wait here for one (default: 4 x ``concurrency``, as Celery's
            prefetch multiplier). Each claim is a round trip, so short tasks
            run faster with more (no-op tasks, 2 processes of 8 threads:
            about 16,600 tasks/s with the default, 38,600 with 256;
            docs/BENCHMARKS.md); long ones share out better among workers
            with less. Their
            leases are extended from the claim on; a stop runs them before
            it ends. ``0`` claims only what the free threads can start.
        ack_linger: seconds an outcome waits for a claim to ride on before
            it is sent alone to ``POST /v1/acks`` (default 5 ms: a key's next
            task is handed out only once the previous one is acknowledged).
        traceback_lines: how many last lines of a handler's traceback become
            the task's ``last_error``.
        worker_name: the name each claim gives chronoqd (at most 200 bytes,
            no control characters), shown as the task's ``worker`` by
            ``GET /v1/tasks/{id}`` and the dashboard; default
            ``<hostname>:<pid>``. ``""`` names nobody.

    Each queue has one claiming thread, which claims as many tasks as it has
    free handler threads plus ``prefetch``, with the outcomes of finished
    tasks riding on the claim (``acks``). A key's tasks still run in order:
    chronoqd hands out a key's next task only once the one before is
    acknowledged. Outcomes that find no claim about to be sent go together
    in one ``POST /v1/acks``. Failures ride the same way (``{id, token,
    error, retry_in_ms?}``). Unreachable servers are retried
    (1 s doubling to 30 s) with the outcomes kept; tasks whose outcome could
    not be sent run again when their lease lapses.
    """

    def __init__(
        self,
        client: Client,
        *,
        concurrency: int = 1,
        lease: Duration = 30000,
        wait: Duration = 5000,
        prefetch: Optional[int] = None,
        ack_linger: float = 0.005,
        traceback_lines: int = 12,
        worker_name: Optional[str] = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must not be negative")
        self.client = client
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.lease_ms = to_millis(lease, "lease")
        self.wait_ms = to_millis(wait, "wait")
        self.ack_linger = ack_linger
        self.traceback_lines = traceback_lines
        self.worker_name = default_worker_name() if worker_name is None else worker_name
        self.stats = WorkerStats()
        self.error: Optional[BaseException] = None
        self._regs: Dict[str, _Registration] = {}
        # One lock and a condition per waiting thread, so that a finished task
        # wakes only the threads with something to do: its queue's claiming
        # thread (_Registration.room), the flusher (outcomes to send), the
        # extender (a lease due sooner than it planned to wake). The lock is
        # reentrant: a signal handler that interrupts the main thread while it
        # holds it gets it too.
        self._lock = threading.RLock()
        self._outcomes_cv = threading.Condition(self._lock)
        self._extend_cv = threading.Condition(self._lock)
        self._extend_at = float("inf")
        # Lease extensions are scheduled on the client's clock (real time
        # unless a test gave the client its own; chronoq/_clock.py).
        self._clock = client._clock
        self._stats_lock = threading.Lock()
        self._pending: List[AckItem] = []
        self._tracked: Dict[Tuple[str, int], _Tracked] = {}
        self._stopping = False
        self._stop_event = threading.Event()
        self._threads: List[threading.Thread] = []
        self._flusher_stop = False
        self._started = False
        self._signals = 0

    # --- registration -------------------------------------------------------------

    def register(
        self,
        queue: str,
        fn: Handler,
        *,
        concurrency: Optional[int] = None,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
    ) -> None:
        """Runs ``fn(task)`` for each task of ``queue``: returning acknowledges
        the task, an exception fails it with the last lines of its traceback
        as the error (:class:`RetryLater` chooses the retry delay)."""
        self._add(queue, fn, False, 1, concurrency, lease, wait)

    def handler(
        self,
        queue: str,
        *,
        concurrency: Optional[int] = None,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`register`."""

        def decorate(fn: F) -> F:
            self.register(queue, fn, concurrency=concurrency, lease=lease, wait=wait)
            return fn

        return decorate

    def register_batch(
        self,
        queue: str,
        fn: BatchHandler,
        *,
        max: int = 1000,
        concurrency: Optional[int] = None,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
    ) -> None:
        """Runs ``fn(tasks)`` on up to ``max`` tasks of ``queue`` at a time.

        ``fn`` returns the outcome of each task:

        - ``None``: every task succeeded;
        - a mapping from task id to ``True`` or ``None`` (succeeded), or to an
          exception, a string (the error) or ``False`` (failed);
        - a sequence as long as ``tasks`` of the same values, in order.

        A task the result does not mention fails. An exception raised by
        ``fn`` fails every task. Successes and failures are reported in one
        request (riding on the next claim, or one ``POST /v1/acks``).
        """
        if not 1 <= max <= MAX_BATCH:
            raise ValueError(f"max must be between 1 and {MAX_BATCH}")
        self._add(queue, fn, True, max, concurrency, lease, wait)

    def batch_handler(
        self,
        queue: str,
        *,
        max: int = 1000,
        concurrency: Optional[int] = None,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`register_batch`."""

        def decorate(fn: F) -> F:
            self.register_batch(
                queue, fn, max=max, concurrency=concurrency, lease=lease, wait=wait
            )
            return fn

        return decorate

    def _add(
        self,
        queue: str,
        fn: Callable[..., Any],
        batch: bool,
        max: int,
        concurrency: Optional[int],
        lease: Optional[Duration],
        wait: Optional[Duration],
    ) -> None:
        if self._started:
            raise RuntimeError("register handlers before the worker starts")
        if queue in self._regs:
            raise ValueError(f"queue {queue!r} already has a handler")
        n = concurrency if concurrency is not None else (1 if batch else self.concurrency)
        if n < 1:
            raise ValueError("concurrency must be at least 1")
        prefetch = 0 if batch else (self.prefetch if self.prefetch is not None else 4 * n)
        self._regs[queue] = _Registration(
            queue=queue,
            fn=fn,
            batch=batch,
            max=max,
            concurrency=n,
            limit=n + prefetch,
            lease_ms=to_millis(lease, "lease") if lease is not None else self.lease_ms,
            wait_ms=to_millis(wait, "wait") if wait is not None else self.wait_ms,
            room=threading.Condition(self._lock),
        )

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, name, getattr(self.stats, name) + n)

    @property
    def queues(self) -> List[str]:
        """The queues with a handler."""
        return list(self._regs)

    # --- running ------------------------------------------------------------------

    def start(self) -> None:
        """Starts the worker's threads and returns; see :meth:`run`."""
        if self._started:
            raise RuntimeError("the worker was already started")
        if not self._regs:
            raise RuntimeError("no handler registered")
        self._started = True
        for reg in self._regs.values():
            for i in range(reg.concurrency):
                t = threading.Thread(
                    target=self._slot_loop, args=(reg,), name=f"chronoq-{reg.queue}-{i}",
                    daemon=True,
                )
                reg.threads.append(t)
                t.start()
            self._spawn(self._claim_loop, f"chronoq-claim-{reg.queue}", reg)
        self._spawn(self._flush_loop, "chronoq-acks")
        self._spawn(self._extend_loop, "chronoq-extend")

    def _spawn(self, target: Callable[..., None], name: str, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self) -> None:
        """Asks the worker to stop (any thread, or a signal handler): no new
        claims; running handlers finish and their outcomes are sent. A claim
        waiting in chronoqd returns within ``wait`` and its tasks are run."""
        self._stopping = True
        self._stop_event.set()
        with self._lock:
            for reg in self._regs.values():
                reg.room.notify_all()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping

    def run(self, *, install_signal_handlers: bool = True, flush_timeout: float = 30.0) -> None:
        """Starts the worker and blocks until it has stopped.

        In the main thread (and unless ``install_signal_handlers`` is false)
        the first SIGTERM or SIGINT stops it gracefully (:meth:`stop`): the
        running handlers finish and the outcomes left are sent, trying for
        ``flush_timeout`` seconds. A second one stops waiting for the
        handlers: their tasks run again once their leases lapse. Raises the
        error that stopped the worker, if one did (a claim refused for good:
        a bad queue name, a wrong token).
        """
        previous: Dict[signal.Signals, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            self.start()
            self._stop_event.wait()
            self.shutdown(flush_timeout=flush_timeout)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.error is not None:
            raise self.error

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("signal %d: stopping (running tasks finish)", signum)
        else:
            log.warning("signal %d again: not waiting for running tasks", signum)
        self.stop()

    def shutdown(self, *, flush_timeout: float = 30.0) -> None:
        """Stops the worker (if :meth:`stop` was not called yet) and waits:
        for the claims in flight, for running handlers (until a second
        signal), then sends the outcomes left, trying for ``flush_timeout``
        seconds."""
        self.stop()
        for t in self._threads:
            if t.name.startswith("chronoq-claim-"):
                t.join()
        for reg in self._regs.values():
            for _ in reg.threads:
                reg.work.put(None)
        for reg in self._regs.values():
            for t in reg.threads:
                while t.is_alive() and self._signals < 2:
                    t.join(0.1)
        with self._lock:
            self._flusher_stop = True
            self._outcomes_cv.notify_all()
            self._extend_cv.notify_all()
        for t in self._threads:
            if t.name == "chronoq-acks":
                t.join()
        self._final_flush(flush_timeout)
        for t in self._threads:
            t.join(1.0)

    # --- claiming -----------------------------------------------------------------

    def _take_pending(self) -> List[AckItem]:
        """Takes the outcomes that can ride on a request (the caller holds
        the lock)."""
        items, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        return items

    def _put_back(self, items: Sequence[AckItem]) -> None:
        with self._lock:
            self._pending[:0] = list(items)
            self._outcomes_cv.notify()

    def _fatal(self, e: BaseException) -> None:
        log.error("worker stopping: %s", e)
        if self.error is None:
            self.error = e
        self.stop()

    def _claim_loop(self, reg: _Registration) -> None:
        backoff = 1.0
        # A claim long-polls only while a handler thread is free; one made
        # only to prefetch does not wait, so that a stop never finds a claim
        # waiting in chronoqd for tasks no thread could start. When such a
        # claim comes back empty, the next waits for a thread to free up.
        drained = False
        while True:
            with self._lock:
                while not self._stopping and (
                    reg.running >= reg.limit or (drained and reg.running >= reg.concurrency)
                ):
                    reg.room.wait()
                if self._stopping:
                    return
                room = reg.limit - reg.running
                wait_ms = reg.wait_ms if reg.running < reg.concurrency else 0
                acks = self._take_pending()
            try:
                answer = self.client.claim(
                    reg.queue,
                    max=reg.max if reg.batch else room,
                    lease=reg.lease_ms,
                    wait=wait_ms,
                    acks=acks or None,
                    worker=self.worker_name,
                )
            except (Unavailable, OutcomeUnknown) as e:
                self._put_back(acks)
                log.warning("claim on %s failed (retrying in %.0f s): %s", reg.queue, backoff, e)
                self._stop_event.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            except ChronoqError as e:
                self._put_back(acks)
                self._fatal(e)
                return
            backoff = 1.0
            if acks:
                self._count("ack_requests")
                self._check_results(acks, answer.acks)
            drained = wait_ms == 0 and not answer.tasks
            if not answer.tasks:
                continue
            self._count("claimed", len(answer.tasks))
            with self._lock:
                next_at = self._clock.monotonic() + reg.lease_ms / 3000.0
                for lease in answer.tasks:
                    self._tracked[(lease.id, lease.token)] = _Tracked(lease, reg.lease_ms, next_at)
                if next_at < self._extend_at:
                    self._extend_cv.notify()
                if reg.batch:
                    reg.running += 1
                    reg.work.put(list(answer.tasks))
                else:
                    reg.running += len(answer.tasks)
                    for lease in answer.tasks:
                        reg.work.put([lease])

    def _check_results(self, items: Sequence[AckItem], results: Sequence[AckResult]) -> None:
        for item, result in zip(items, results):
            if result.ok:
                self._count("failed" if item.is_failure else "succeeded")
            else:
                self._count("refused")
                log.warning(
                    "task %s: chronoqd refused its outcome (%s): %s", item.id,
                    "failure" if item.is_failure else "success", result.error,
                )

    # --- running handlers ---------------------------------------------------------

    def _slot_loop(self, reg: _Registration) -> None:
        while True:
            leases = reg.work.get()
            if leases is None:
                return
            items: List[AckItem] = []
            try:
                items = self._run(reg, leases)
            finally:
                with self._lock:
                    for lease in leases:
                        self._tracked.pop((lease.id, lease.token), None)
                    if items and not self._pending:
                        self._outcomes_cv.notify()
                    self._pending.extend(items)
                    reg.running -= 1
                    reg.room.notify()

    def _failure(self, lease: Lease, exc: BaseException) -> AckItem:
        delay = exc.delay if isinstance(exc, RetryLater) else None
        return AckItem(lease.id, lease.token, error_text(exc, self.traceback_lines), delay)

    def _run(self, reg: _Registration, leases: List[Lease]) -> List[AckItem]:
        if not reg.batch:
            lease = leases[0]
            try:
                reg.fn(lease)
            except BaseException as e:  # noqa: BLE001 - any exception fails the task
                log.info("task %s failed: %s", lease.id, e)
                return [self._failure(lease, e)]
            return [AckItem(lease.id, lease.token)]
        try:
            result = reg.fn(leases)
        except BaseException as e:  # noqa: BLE001
            log.info("batch of %d tasks of %s failed: %s", len(leases), reg.queue, e)
            return [self._failure(lease, e) for lease in leases]
        return self._batch_outcomes(leases, result)

    def _batch_outcomes(self, leases: List[Lease], result: Any) -> List[AckItem]:
        if result is None:
            return [AckItem(lease.id, lease.token) for lease in leases]
        missing = object()
        values: List[Any]
        if isinstance(result, Mapping):
            values = [result.get(lease.id, missing) for lease in leases]
        elif isinstance(result, (list, tuple)) and len(result) == len(leases):
            values = list(result)
        else:
            text = (
                f"batch handler returned {type(result).__name__} "
                f"(of length {len(result)} for {len(leases)} tasks)"
                if isinstance(result, (list, tuple))
                else f"batch handler returned {type(result).__name__}"
            )
            return [AckItem(lease.id, lease.token, text) for lease in leases]
        out: List[AckItem] = []
        for lease, value in zip(leases, values):
            if value is None or value is True:
                out.append(AckItem(lease.id, lease.token))
            elif isinstance(value, BaseException):
                out.append(self._failure(lease, value))
            elif value is missing:
                out.append(AckItem(lease.id, lease.token, "batch handler returned no result for it"))
            elif isinstance(value, str):
                out.append(AckItem(lease.id, lease.token, value))
            else:
                out.append(AckItem(lease.id, lease.token, f"batch handler returned {value!r}"))
        return out

    # --- sending outcomes ---------------------------------------------------------

    def _send(self, items: List[AckItem]) -> None:
        """Sends outcomes together in one POST /v1/acks. Raises on errors
        worth retrying (the caller puts the items back; a resent outcome that
        was applied is refused as stale, which changes nothing)."""
        try:
            results = self.client.ack_many(items)
        except InvalidArgument as e:
            log.error("chronoqd refused %d outcomes: %s", len(items), e)
            return
        self._count("ack_requests")
        self._check_results(items, results)

    def _flush_loop(self) -> None:
        backoff = 1.0
        while True:
            with self._lock:
                while not self._pending and not self._flusher_stop:
                    self._outcomes_cv.wait()
                if self._flusher_stop:
                    return
                # Give a claim about to be sent the chance to carry them.
                deadline = time.monotonic() + self.ack_linger
                while self._pending and not self._flusher_stop:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._outcomes_cv.wait(left)
                if self._flusher_stop:
                    return
                items, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            if not items:
                continue
            try:
                self._send(items)
                backoff = 1.0
            except ChronoqError as e:
                self._put_back(items)
                log.warning("could not send %d outcomes (retrying in %.0f s): %s",
                            len(items), backoff, e)
                with self._lock:
                    if not self._flusher_stop:
                        self._outcomes_cv.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _final_flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        delay = 0.2
        while True:
            with self._lock:
                items, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            if not items:
                return
            try:
                self._send(items)
                continue
            except ChronoqError as e:
                self._put_back(items)
                if time.monotonic() + delay > deadline:
                    log.error("gave up sending %d outcomes: %s (the tasks run again once "
                              "their leases lapse)", len(self._pending), e)
                    return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    # --- extending leases ---------------------------------------------------------

    def _extend_loop(self) -> None:
        clock = self._clock
        while True:
            with self._lock:
                if self._flusher_stop:
                    return
                now = clock.monotonic()
                due = [t for t in self._tracked.values() if t.next_at <= now]
                if not due:
                    # Until the soonest extension is due, or a claim brings
                    # one due sooner (it notifies), or the worker stops.
                    soonest = min((t.next_at for t in self._tracked.values()), default=None)
                    if soonest is None:
                        self._extend_cv.wait()  # nothing leased: until a claim
                    else:
                        self._extend_at = soonest
                        clock.wait_until(self._extend_cv, soonest)
                        self._extend_at = float("inf")
                    continue
            for t in due:
                key = (t.lease.id, t.lease.token)
                with self._lock:
                    if key not in self._tracked:
                        continue
                try:
                    self.client.extend(t.lease.id, t.lease.token, t.lease_ms)
                    t.next_at = clock.monotonic() + t.lease_ms / 3000.0
                    self._count("extensions")
                except StaleToken as e:
                    self._count("leases_lost")
                    log.warning("task %s: lease lost, it may run elsewhere too: %s",
                                t.lease.id, e)
                    with self._lock:
                        self._tracked.pop(key, None)
                except ChronoqError as e:
                    log.warning("task %s: could not extend its lease (will retry): %s",
                                t.lease.id, e)
                    t.next_at = clock.monotonic() + min(t.lease_ms / 3000.0, 1.0)


def load_worker(spec: str) -> Any:
    """Imports ``module:attr`` and returns the worker it names (``attr`` a
    :class:`Worker` or an :class:`~chronoq.AsyncWorker`, or a callable
    returning one)."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected module:attr")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    from .aio import AsyncWorker

    if not isinstance(obj, (Worker, AsyncWorker)) and callable(obj):
        obj = obj()
    if not isinstance(obj, (Worker, AsyncWorker)):
        raise TypeError(f"{spec} is a {type(obj).__name__}, not a Worker (or a factory of one)")
    return obj

