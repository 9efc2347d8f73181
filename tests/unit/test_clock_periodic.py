"""clock.Periodic: a periodic broker job runs once per manual-clock advance however long
(at the advance's end time), every period otherwise, and never after cancel()."""
from __future__ import annotations

import asyncio

from letterbox.clock import MAX_ADVANCE_MS, ManualClock, Periodic, RealClock


def test_periodic_runs_once_per_long_advance_and_stops_when_cancelled() -> None:
    async def run() -> None:
        clock = ManualClock(start_ms=0)
        seen: list[int] = []
        job = Periodic(clock, 60, lambda: seen.append(clock.now_ms())).start()
        assert clock.advance(MAX_ADVANCE_MS) == 1  # not ~5 million
        await asyncio.sleep(0)
        assert seen == [MAX_ADVANCE_MS]  # ran after the advance, seeing its end
        clock.advance(59_999)
        await asyncio.sleep(0)
        assert len(seen) == 1
        clock.advance(1)
        await asyncio.sleep(0)
        assert seen == [MAX_ADVANCE_MS, MAX_ADVANCE_MS + 60_000]
        clock.advance(60_000)  # due, then cancelled before the loop ran it: never runs
        job.cancel()
        await asyncio.sleep(0)
        clock.advance(10 * 60_000)
        await asyncio.sleep(0)
        assert len(seen) == 2 and clock.pending_timers() == 0

    asyncio.run(run())


def test_periodic_on_the_real_clock() -> None:
    async def run() -> int:
        seen: list[int] = []
        job = Periodic(RealClock(), 0.01, lambda: seen.append(1)).start()
        for _ in range(500):
            if len(seen) >= 3:
                break
            await asyncio.sleep(0.01)
        job.cancel()
        return len(seen)

    assert asyncio.run(run()) >= 3
