"""letterbox/clock.py without a broker: the manual clock fires timers in time order,
each at its own time, once, never when cancelled, and never moves by itself."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from letterbox.clock import MAX_ADVANCE_MS, ManualClock, RealClock, make_clock
from letterbox.config import BrokerConfig, ConfigError


def test_advance_fires_due_timers_in_time_order_each_at_its_own_time() -> None:
    async def run() -> None:
        clock = ManualClock(start_ms=1_000)
        seen: list[tuple[str, int]] = []
        clock.call_at(1_300, lambda: seen.append(("c", clock.now_ms())))
        clock.call_at(1_100, lambda: seen.append(("a", clock.now_ms())))
        clock.call_at(1_200, lambda: seen.append(("b", clock.now_ms())))
        late = clock.call_at(5_000, lambda: seen.append(("late", clock.now_ms())))
        assert clock.advance(250) == 2
        assert seen == [("a", 1_100), ("b", 1_200)] and clock.now_ms() == 1_250
        assert clock.pending_timers() == 2 and clock.next_timer_ms() == 1_300
        late.cancel()
        assert clock.advance(10_000) == 1
        assert seen[-1] == ("c", 1_300) and clock.now_ms() == 11_250
        assert clock.pending_timers() == 0 and clock.next_timer_ms() is None

    asyncio.run(run())


def test_a_timer_set_by_a_timer_within_the_advance_fires_in_it() -> None:
    async def run() -> None:
        clock = ManualClock(start_ms=0)
        seen: list[int] = []

        def tick() -> None:
            seen.append(clock.now_ms())
            if len(seen) < 5:
                clock.call_later(1.0, tick)

        clock.call_at(1_000, tick)
        assert clock.advance(3_500) == 3
        assert seen == [1_000, 2_000, 3_000]
        clock.advance(10_000)
        assert seen == [1_000, 2_000, 3_000, 4_000, 5_000]

    asyncio.run(run())


def test_a_failing_timer_does_not_stop_the_others() -> None:
    async def run() -> None:
        clock = ManualClock(start_ms=0)
        seen: list[int] = []
        clock.call_at(10, lambda: 1 // 0)
        clock.call_at(20, lambda: seen.append(clock.now_ms()))
        assert clock.advance(30) == 2 and seen == [20]

    asyncio.run(run())


def test_sleep_follows_the_manual_clock_and_due_timers_run_on_the_next_turn() -> None:
    async def run() -> None:
        clock = ManualClock(start_ms=0)
        sleeper = asyncio.ensure_future(clock.sleep(60))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not sleeper.done(), "a manual clock does not move by itself"
        clock.advance(59_999)
        await asyncio.sleep(0)
        assert not sleeper.done()
        clock.advance(1)
        await asyncio.wait_for(sleeper, 1)
        ran: list[int] = []
        clock.call_at(clock.now_ms(), lambda: ran.append(1))  # already due: next loop turn
        assert ran == []
        await asyncio.sleep(0)
        assert ran == [1]
        cancelled = asyncio.ensure_future(clock.sleep(5))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        assert clock.pending_timers() == 0, "a cancelled sleep leaves no timer behind"

    asyncio.run(run())


def test_advance_refuses_going_backwards_or_too_far() -> None:
    clock = ManualClock(start_ms=7)
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="ten years"):
        clock.advance(MAX_ADVANCE_MS + 1)
    assert clock.now_ms() == 7


def test_real_clock_and_make_clock() -> None:
    async def run() -> None:
        clock = RealClock()
        fired = asyncio.Event()
        clock.call_at(clock.now_ms() + 20, fired.set)
        await asyncio.wait_for(fired.wait(), 5)
        await clock.sleep(0.01)

    asyncio.run(run())
    assert make_clock("real").kind == "real" and not make_clock("real").manual
    assert make_clock("manual").manual
    with pytest.raises(ValueError, match="real, manual"):
        make_clock("sundial")


def test_config_refuses_a_manual_clock_unless_test_clocks_are_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="add --allow-test-clock"):
        BrokerConfig.load(env={}, overrides={"clock": "manual"})
    with pytest.raises(ConfigError, match="clock must be one of real, manual"):
        BrokerConfig.load(env={"LETTERBOX_CLOCK": "fast"})
    assert BrokerConfig.load(env={"LETTERBOX_CLOCK": "manual", "LETTERBOX_ALLOW_TEST_CLOCK": "yes"}).clock == "manual"
    toml = tmp_path / "letterbox.toml"
    toml.write_text('clock = "manual"\nallow_test_clock = true\n')
    cfg = BrokerConfig.load(toml, env={})
    assert (cfg.clock, cfg.allow_test_clock) == ("manual", True)
    assert BrokerConfig.load(env={}).clock == "real"
