"""AsyncClient and AsyncWorker (the synchronous logic, offloaded)."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from chronoq import AsyncClient, AsyncWorker, Lease, LockWaitTimeout, NotFound, TaskSpec
from conftest import Server


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


def test_async_worker(server: Server, q: str) -> None:
    async def main() -> List[int]:
        c = AsyncClient(server.url, timeout=10)
        seen: List[int] = []
        worker = AsyncWorker(c, concurrency=4, wait=500)

        @worker.handler(q)
        async def handle(task: Lease) -> None:
            await asyncio.sleep(0)  # a coroutine on the test's loop
            seen.append(task.payload)
            if len(seen) == 5:
                worker.stop()

        await c.enqueue_many([TaskSpec(q, i) for i in range(5)])
        await asyncio.wait_for(worker.run(install_signal_handlers=False), 30)
        assert worker.stats.succeeded == 5
        return seen

    assert sorted(asyncio.run(main())) == [0, 1, 2, 3, 4]
