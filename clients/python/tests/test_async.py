"""AsyncClient and AsyncWorker (the synchronous logic, offloaded).

The worker's stop and the lock's extension run on fake time
(conftest.FakeTime), as in test_worker.py and test_lock.py."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import List

import pytest

from chronoq import AsyncClient, AsyncWorker, Lease, LockWaitTimeout, NotFound, TaskSpec
from chronoq.aio import AsyncLock
from conftest import FakeTime, InThread, Server, wait_for


def test_async_client_calls(server: Server, q: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, timeout=10) as c:
            t = await c.enqueue(q, {"a": 1}, id=q + "-1", key="k")
            assert (await c.get(t.id)).payload == {"a": 1}
            await c.enqueue_many([TaskSpec(q, i) for i in range(3)])
            assert len([x async for x in c.list(queue=q, page_size=2)]) == 4
            claimed = await c.claim(q, max=10, worker="async-1")
            assert len(claimed) == 4
            assert (await c.get(t.id)).worker == "async-1"
            results = await c.ack_many(claimed.tasks)
            assert all(r.ok for r in results)
            with pytest.raises(NotFound):
                await c.get("nope-" + q)
            assert (await c.configure_queue(q, max_attempts=3)).max_attempts == 3
            assert (await c.pause_queue(q)).paused
            assert not (await c.resume_queue(q)).paused
            s = await c.create_schedule("s-" + q, q, every=60000)
            assert [x.name async for x in c.list_schedules(queue=q)] == [s.name]
            assert len(await c.next_occurrences(s.name, 2)) == 2
            await c.delete_schedule(s.name)
            assert (await c.health())["status"] == "ok"
            assert await c.version()
            async with c.lock(q, lease=60000) as lk:
                assert lk.token > 0
                with pytest.raises(LockWaitTimeout):
                    await c.acquire_lock(q, wait=0)
            assert not (await c.get_lock(q)).held
            # Calls run concurrently in the executor.
            many = await asyncio.gather(*(c.enqueue(q, i) for i in range(20)))
            assert len({t.id for t in many}) == 20

    asyncio.run(main())


def test_async_worker(fake_time: FakeTime, q: str) -> None:
    stopped = threading.Event()

    async def main() -> List[int]:
        c = AsyncClient(fake_time.server.url, timeout=10, _clock=fake_time.clock)
        seen: List[int] = []
        worker = AsyncWorker(c, concurrency=4, wait=500)

        @worker.handler(q)
        async def handle(task: Lease) -> None:
            await asyncio.sleep(0)  # a coroutine on the test's loop
            seen.append(task.payload)
            if len(seen) == 5:
                worker.stop()
                stopped.set()

        await c.enqueue_many([TaskSpec(q, i) for i in range(5)])
        await asyncio.wait_for(worker.run(install_signal_handlers=False), 30)
        assert worker.stats.succeeded == 5
        return seen

    # The stop waits for the claim in flight: move time past its wait.
    running = InThread(lambda: asyncio.run(main()), "AsyncWorker.run")
    assert stopped.wait(10), "the handlers did not run the five tasks"
    fake_time.run_out_until(lambda: not running.running, 500, "AsyncWorker.run to return")
    assert sorted(running.result()) == [0, 1, 2, 3, 4]


def test_async_lock_is_extended_on_the_clients_clock(fake_time: FakeTime, q: str) -> None:
    async def main() -> None:
        async with AsyncClient(fake_time.server.url, timeout=10, _clock=fake_time.clock) as c:
            async with c.lock(q, lease=30000) as lk:
                first = lk.lock.expires_at
                assert first is not None
                await asyncio.get_running_loop().run_in_executor(None, extend_once, lk)
                assert lk.lock.extensions == 1 and not lk.lost
                info = await c.get_lock(q)
                assert info.expires_at == first + timedelta(seconds=10)
            assert not (await c.get_lock(q)).held

    def extend_once(lk: AsyncLock) -> None:
        fake_time.wait_client_timer(10000, "the lock's extension")
        fake_time.advance(10000)
        wait_for(lambda: lk.lock.extensions == 1, "the lock's extension to be answered")

    asyncio.run(main())
