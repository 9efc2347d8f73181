"""The per-DLQ redrive lock is forgotten once nobody holds or waits for it (it used to stay
in a module dict for every DLQ ever redriven or purged), and it still excludes."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from letterbox.broker.moves import redrive as rd


def test_locks_exclude_and_are_forgotten() -> None:
    async def scenario() -> list[str]:
        topics: list[Any] = [SimpleNamespace(name=f"persistent://t/ns/q{i}-DLQ") for i in range(50)]
        order: list[str] = []

        async def hold(topic: Any, tag: str) -> None:
            async with rd._lock(topic):
                order.append(f"{tag}-in")
                await asyncio.sleep(0.01)
                order.append(f"{tag}-out")

        await asyncio.gather(hold(topics[0], "a"), hold(topics[0], "b"))
        assert rd._locks == {}
        await asyncio.gather(*(hold(t, str(i)) for i, t in enumerate(topics)))
        assert rd._locks == {}
        waiter = asyncio.ensure_future(hold(topics[1], "c"))
        async with rd._lock(topics[1]):
            await asyncio.sleep(0)
            waiter.cancel()  # a waiter that gives up releases its share too
        await asyncio.gather(waiter, return_exceptions=True)
        assert rd._locks == {}
        return order

    order = asyncio.run(scenario())
    assert order[:4] == ["a-in", "a-out", "b-in", "b-out"]  # the same DLQ: one at a time
