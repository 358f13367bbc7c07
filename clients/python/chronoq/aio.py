"""asyncio twins of :class:`~chronoq.Client` and :class:`~chronoq.Worker`.

They share all the logic of the synchronous classes: :class:`AsyncClient`
runs each :class:`~chronoq.Client` call in a thread of the event loop's
default executor (so requests are built, sent over keep-alive connections,
moved between nodes and parsed exactly as by the synchronous client), and
:class:`AsyncWorker` is a :class:`~chronoq.Worker` whose handler threads run
coroutine handlers on your event loop.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from datetime import datetime
from types import TracebackType
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
)

from .client import Client
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
    Schedule,
    Target,
    Task,
    TaskList,
    TaskSpec,
    Time,
)
from .worker import Worker, WorkerStats

T = TypeVar("T")
AF = TypeVar("AF", bound=Callable[..., Awaitable[Any]])


class AsyncClient:
    """The :class:`~chronoq.Client` API as coroutines.

    Takes the arguments of :class:`~chronoq.Client` (or ``client=`` an
    existing one). Every method has the synchronous method's arguments,
    behaviour and docstring (retries and node moves included); it runs that
    method in the default executor. ``list`` and ``list_schedules`` are async
    iterators; ``lock`` is an async context manager.
    """

    def __init__(
        self,
        url: Union[str, Sequence[str], None] = None,
        *,
        client: Optional[Client] = None,
        **options: Any,
    ) -> None:
        self.sync: Client = client if client is not None else Client(url, **options)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sync.close()

    async def close(self) -> None:
        """Closes the connections."""
        self.sync.close()

    async def request(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        """:meth:`chronoq.Client.request`."""
        return await self._run(self.sync.request, method, path, body, **options)

    # tasks
    async def enqueue(
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
        """:meth:`chronoq.Client.enqueue`."""
        return await self._run(
            self.sync.enqueue, queue, payload, run_at=run_at, delay=delay, id=id,
            on_conflict=on_conflict, max_attempts=max_attempts, priority=priority,
            backoff=backoff, target=target, key=key,
        )

    async def enqueue_many(
        self, tasks: Iterable[Union[TaskSpec, Mapping[str, Any]]], *, batch_size: int = 10_000
    ) -> TaskList:
        """:meth:`chronoq.Client.enqueue_many`."""
        return await self._run(self.sync.enqueue_many, list(tasks), batch_size=batch_size)

    async def get(self, id: str, attempts: bool = False) -> Task:
        """:meth:`chronoq.Client.get`."""
        return await self._run(self.sync.get, id, attempts)

    async def cancel(self, id: str) -> Task:
        """:meth:`chronoq.Client.cancel`."""
        return await self._run(self.sync.cancel, id)

    async def reschedule(self, id: str, **options: Any) -> Task:
        """:meth:`chronoq.Client.reschedule` (``run_at`` or ``delay``,
        ``payload``)."""
        return await self._run(self.sync.reschedule, id, **options)

    async def retry(self, id: str) -> Task:
        """:meth:`chronoq.Client.retry`."""
        return await self._run(self.sync.retry, id)

    async def list_page(self, **filters: Any) -> Page:
        """:meth:`chronoq.Client.list_page`."""
        return await self._run(self.sync.list_page, **filters)

    async def list(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        key: Optional[str] = None,
        page_size: int = 100,
    ) -> AsyncIterator[Task]:
        """:meth:`chronoq.Client.list`, as an async iterator."""
        cursor: Optional[str] = None
        while True:
            page = await self._run(
                self.sync.list_page, queue=queue, state=state, key=key, limit=page_size,
                cursor=cursor,
            )
            for task in page.items:
                yield task
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # workers
    async def claim(
        self,
        queue: str,
        *,
        max: int = 1,
        lease: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        acks: Optional[Iterable[AckLike]] = None,
        worker: Optional[str] = None,
    ) -> ClaimResult:
        """:meth:`chronoq.Client.claim`."""
        items = list(acks) if acks is not None else None
        return await self._run(
            self.sync.claim, queue, max=max, lease=lease, wait=wait, acks=items, worker=worker
        )

    async def ack(self, id: str, token: int) -> None:
        """:meth:`chronoq.Client.ack`."""
        await self._run(self.sync.ack, id, token)

    async def fail(
        self, id: str, token: int, error: Optional[str] = None, *,
        retry_in: Optional[Duration] = None,
    ) -> None:
        """:meth:`chronoq.Client.fail`."""
        await self._run(self.sync.fail, id, token, error, retry_in=retry_in)

    async def extend(self, id: str, token: int, lease: Duration) -> datetime:
        """:meth:`chronoq.Client.extend`."""
        return await self._run(self.sync.extend, id, token, lease)

    async def ack_many(self, items: Iterable[AckLike]) -> List[AckResult]:
        """:meth:`chronoq.Client.ack_many`."""
        return await self._run(self.sync.ack_many, list(items))

    # queues
    async def list_queues(self) -> List[QueueInfo]:
        """:meth:`chronoq.Client.list_queues`."""
        return await self._run(self.sync.list_queues)

    async def get_queue(self, name: str) -> QueueInfo:
        """:meth:`chronoq.Client.get_queue`."""
        return await self._run(self.sync.get_queue, name)

    async def configure_queue(self, name: str, **settings: Any) -> QueueInfo:
        """:meth:`chronoq.Client.configure_queue`."""
        return await self._run(self.sync.configure_queue, name, **settings)

    async def pause_queue(self, name: str) -> QueueInfo:
        """:meth:`chronoq.Client.pause_queue`."""
        return await self._run(self.sync.pause_queue, name)

    async def resume_queue(self, name: str) -> QueueInfo:
        """:meth:`chronoq.Client.resume_queue`."""
        return await self._run(self.sync.resume_queue, name)

    # schedules
    async def create_schedule(self, name: str, queue: str, **options: Any) -> Schedule:
        """:meth:`chronoq.Client.create_schedule`."""
        return await self._run(self.sync.create_schedule, name, queue, **options)

    async def put_schedule(self, name: str, queue: str, **options: Any) -> Schedule:
        """:meth:`chronoq.Client.put_schedule`."""
        return await self._run(self.sync.put_schedule, name, queue, **options)

    async def get_schedule(self, name: str) -> Schedule:
        """:meth:`chronoq.Client.get_schedule`."""
        return await self._run(self.sync.get_schedule, name)

    async def list_schedules(
        self, *, queue: Optional[str] = None, page_size: int = 100
    ) -> AsyncIterator[Schedule]:
        """:meth:`chronoq.Client.list_schedules`, as an async iterator."""
        cursor: Optional[str] = None
        while True:
            page = await self._run(
                self.sync.list_schedules_page, queue=queue, limit=page_size, cursor=cursor
            )
            for schedule in page.items:
                yield schedule
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def delete_schedule(self, name: str) -> None:
        """:meth:`chronoq.Client.delete_schedule`."""
        await self._run(self.sync.delete_schedule, name)

    async def pause_schedule(self, name: str) -> Schedule:
        """:meth:`chronoq.Client.pause_schedule`."""
        return await self._run(self.sync.pause_schedule, name)

    async def resume_schedule(self, name: str) -> Schedule:
        """:meth:`chronoq.Client.resume_schedule`."""
        return await self._run(self.sync.resume_schedule, name)

    async def next_occurrences(self, name: str, count: int = 10) -> List[datetime]:
        """:meth:`chronoq.Client.next_occurrences`."""
        return await self._run(self.sync.next_occurrences, name, count)

    # locks
    def lock(
        self,
        key: str,
        *,
        wait: Duration = 5000,
        lease: Duration = 30000,
        owner: Optional[str] = None,
        raise_if_lost: bool = True,
    ) -> "AsyncLock":
        """:meth:`chronoq.Client.lock` as an async context manager
        (``async with client.lock("k") as lk: ... lk.token``)."""
        return AsyncLock(
            self, Lock(self.sync, key, wait=wait, lease=lease, owner=owner,
                       raise_if_lost=raise_if_lost)
        )

    async def acquire_lock(
        self, key: str, *, wait: Duration = 5000, lease: Duration = 30000,
        owner: Optional[str] = None,
    ) -> LockGrant:
        """:meth:`chronoq.Client.acquire_lock`."""
        return await self._run(self.sync.acquire_lock, key, wait=wait, lease=lease, owner=owner)

    async def extend_lock(self, key: str, token: int, lease: Duration) -> LockGrant:
        """:meth:`chronoq.Client.extend_lock`."""
        return await self._run(self.sync.extend_lock, key, token, lease)

    async def release_lock(self, key: str, token: int) -> None:
        """:meth:`chronoq.Client.release_lock`."""
        await self._run(self.sync.release_lock, key, token)

    async def get_lock(self, key: str) -> LockInfo:
        """:meth:`chronoq.Client.get_lock`."""
        return await self._run(self.sync.get_lock, key)

    # operations
    async def health(self) -> Dict[str, Any]:
        """:meth:`chronoq.Client.health`."""
        return await self._run(self.sync.health)

    async def version(self) -> str:
        """:meth:`chronoq.Client.version`."""
        return await self._run(self.sync.version)

    async def cluster(self) -> Dict[str, Any]:
        """:meth:`chronoq.Client.cluster`."""
        return await self._run(self.sync.cluster)


class AsyncLock:
    """The async context manager of :meth:`AsyncClient.lock`: a
    :class:`~chronoq.Lock` (extended by its thread) acquired and released in
    the executor. ``token``, ``lost`` and ``check()`` are the lock's."""

    def __init__(self, client: AsyncClient, lock: Lock) -> None:
        self._client = client
        self.lock = lock

    @property
    def token(self) -> int:
        """The fencing token."""
        return self.lock.token

    @property
    def lost(self) -> bool:
        """True once the lease was lost."""
        return self.lock.lost

    def check(self) -> None:
        """Raises :class:`~chronoq.LockLost` if the lease was lost."""
        self.lock.check()

    async def __aenter__(self) -> "AsyncLock":
        await self._client._run(self.lock.acquire)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self._client._run(self.lock.__exit__, exc_type, exc, tb)


class AsyncWorker:
    """A :class:`~chronoq.Worker` for coroutine handlers.

    ::

        worker = AsyncWorker(AsyncClient(), concurrency=16)

        @worker.handler("emails")
        async def send(task: Lease) -> None:
            await send_email(task.payload)

        asyncio.run(worker.run())

    Takes the arguments of :class:`~chronoq.Worker`. Claiming, acknowledging,
    lease extension and stopping are the :class:`~chronoq.Worker`'s, in its
    threads; each handler thread runs its coroutine on the loop that runs
    :meth:`run` and waits for it, so ``concurrency`` coroutines run at once
    per queue.
    """

    def __init__(self, client: Union[Client, AsyncClient], **options: Any) -> None:
        sync = client.sync if isinstance(client, AsyncClient) else client
        self.worker = Worker(sync, **options)
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def stats(self) -> WorkerStats:
        """The worker's counters."""
        return self.worker.stats

    def _blocking(self, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        def call(arg: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError("AsyncWorker.run() is not running")
            return asyncio.run_coroutine_threadsafe(fn(arg), loop).result()

        return call

    def handler(self, queue: str, **options: Any) -> Callable[[AF], AF]:
        """Registers ``async def fn(task)`` for ``queue`` (the options of
        :meth:`chronoq.Worker.register`)."""

        def decorate(fn: AF) -> AF:
            self.worker.register(queue, self._blocking(fn), **options)
            return fn

        return decorate

    def register(self, queue: str, fn: Callable[[Lease], Awaitable[Any]], **options: Any) -> None:
        """:meth:`chronoq.Worker.register` for a coroutine function."""
        self.worker.register(queue, self._blocking(fn), **options)

    def batch_handler(self, queue: str, **options: Any) -> Callable[[AF], AF]:
        """Registers ``async def fn(tasks)`` (the options and results of
        :meth:`chronoq.Worker.register_batch`)."""

        def decorate(fn: AF) -> AF:
            self.worker.register_batch(queue, self._blocking(fn), **options)
            return fn

        return decorate

    def stop(self) -> None:
        """:meth:`chronoq.Worker.stop`."""
        self.worker.stop()

    async def run(self, *, install_signal_handlers: bool = True, flush_timeout: float = 30.0) -> None:
        """Runs the worker until it stops (SIGTERM/SIGINT, handled on the
        loop, or :meth:`stop`), as :meth:`chronoq.Worker.run`."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        installed: List[signal.Signals] = []
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self.worker._on_signal, sig, None)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        try:
            await loop.run_in_executor(
                None,
                functools.partial(
                    self.worker.run, install_signal_handlers=False, flush_timeout=flush_timeout
                ),
            )
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
