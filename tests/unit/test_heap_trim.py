"""Giving memory back after a connection that held large buffers closes: one trim per
wave of closes, run after a short delay off the event loop, none for small frees."""
from __future__ import annotations

import asyncio

import pytest

from letterbox.broker.connection import heap_trim

MB = 1024 * 1024

pytestmark = pytest.mark.skipif(heap_trim._malloc_trim is None, reason="this C library has no malloc_trim")


def test_a_wave_of_large_frees_schedules_one_trim_and_small_ones_none(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(heap_trim, "_malloc_trim", lambda pad: calls.append(pad) or 1)
    monkeypatch.setattr(heap_trim, "TRIM_DELAY_SECONDS", 0.01)

    async def scenario() -> None:
        heap_trim.after_free(MB - 1)
        assert not heap_trim.pending()
        for _ in range(100):
            heap_trim.after_free(5 * MB)
        assert heap_trim.pending()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if not heap_trim.pending():
                break
        assert not heap_trim.pending()
        heap_trim.after_free(5 * MB)  # a later wave trims again
        await asyncio.sleep(0.2)

    asyncio.run(scenario())
    assert calls == [0, 0]


def test_a_trim_left_pending_on_a_closed_loop_does_not_block_later_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap_trim, "TRIM_DELAY_SECONDS", 60)

    async def schedule() -> None:
        heap_trim.after_free(5 * MB)

    asyncio.run(schedule())  # the loop closes before the trim's time
    assert not heap_trim.pending()
    assert heap_trim.trim_now() in (True, False)
