# The broker's clock: every broker-side "now" (delivery times, backoff due
# times, dead-letter stamps, TTL, retention) and every broker-side timer
# (backoff and delayed-delivery wake-ups, the TTL check, retention
# housekeeping, redrive rate pauses) goes through one Clock, held by the
# BrokerService as `service.clock`. Two kinds:
#   RealClock    wall time (ms since the epoch); timers are the event loop's.
#   ManualClock  for tests (`letterbox standalone --clock manual
#                --allow-test-clock`): starts at the wall time it was made and
#                moves only when advanced; advancing fires, in time order, every
#                timer that falls due, each seeing now_ms() equal to its own due
#                time, then leaves the clock at the target.
# Invariants: a ManualClock never goes backwards; a timer fires at most once
# and never before now_ms() reaches its time; a cancelled timer never fires.
# Timers are plain callbacks run on the event loop's thread (an already due one
# on the loop's next turn), so they may schedule tasks but must not block.
# A periodic job (Periodic) re-arms from the loop's next turn, never from inside
# the advance that fired it: a ten-year advance runs each periodic job once, at
# the advance's end time, instead of once per period (ten million callbacks).
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("letterbox.clock")
CLOCK_KINDS = ("real", "manual")
MAX_ADVANCE_MS = 10 * 366 * 24 * 3600 * 1000  # one advance moves at most ten years


class Timer(Protocol):
    def cancel(self) -> None: ...


def wall_ms() -> int:
    return int(time.time() * 1000)


class Clock:
    """The interface: now_ms(), call_at(at_ms, callback), sleep(seconds)."""

    kind = "real"

    def now_ms(self) -> int:
        raise NotImplementedError

    def call_at(self, at_ms: int, callback: Callable[[], object]) -> Timer:
        """Run `callback` once now_ms() has reached `at_ms` (needs a running loop)."""
        raise NotImplementedError

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Timer:
        return self.call_at(self.now_ms() + max(0, int(seconds * 1000)), callback)

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has moved `seconds` on."""
        raise NotImplementedError

    @property
    def manual(self) -> bool:
        return self.kind == "manual"


class RealClock(Clock):
    kind = "real"

    def now_ms(self) -> int:
        return wall_ms()

    def call_at(self, at_ms: int, callback: Callable[[], object]) -> Timer:
        delay = max(0.0, (at_ms - self.now_ms()) / 1000)
        return asyncio.get_running_loop().call_later(delay, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ManualTimer:
    __slots__ = ("at_ms", "callback", "cancelled")

    def __init__(self, at_ms: int, callback: Callable[[], object]) -> None:
        self.at_ms = at_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock(Clock):
    kind = "manual"

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = wall_ms() if start_ms is None else start_ms
        self._timers: list[tuple[int, int, _ManualTimer]] = []  # heap of (at, seq, timer)
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_at(self, at_ms: int, callback: Callable[[], object]) -> Timer:
        if at_ms <= self._now:
            return asyncio.get_running_loop().call_soon(callback)
        timer = _ManualTimer(at_ms, callback)
        heapq.heappush(self._timers, (at_ms, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await fut
        finally:
            timer.cancel()

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def next_timer_ms(self) -> int | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def advance(self, ms: int) -> int:
        """Move the clock `ms` on, firing the timers due on the way in time order;
        returns how many fired. A timer set by a callback for a time within the
        advance fires in the same advance."""
        if ms < 0:
            raise ValueError(f"the clock only moves forward: ms must be >= 0, got {ms}")
        if ms > MAX_ADVANCE_MS:
            raise ValueError(f"ms must be at most {MAX_ADVANCE_MS} (ten years), got {ms}")
        target = self._now + ms
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            at, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            timer.cancelled = True  # fires once
            self._now = max(self._now, at)
            fired += 1
            try:
                timer.callback()
            except Exception:
                log.exception("a timer of the manual clock failed")
        self._now = target
        return fired


class Periodic:
    """`job` every `seconds` of `clock`'s time, run on the event loop's turn after it fell
    due and re-armed from there: on a manual clock one advance, however long, runs the job
    once (seeing the advance's end time), as the broker's async loops on clock.sleep() do."""

    def __init__(self, clock: Clock, seconds: float, job: Callable[[], object]) -> None:
        self.clock = clock
        self.seconds = seconds
        self.job = job
        self._timer: Timer | asyncio.Handle | None = None
        self._stopped = False

    def start(self) -> Periodic:
        self._stopped = False
        self._arm()
        return self

    def _arm(self) -> None:
        self._timer = self.clock.call_later(self.seconds, self._due)

    def _due(self) -> None:
        if not self._stopped:
            self._timer = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        if self._stopped:
            return
        try:
            self.job()
        except Exception:
            log.exception("a periodic job of the broker's clock failed")
        if not self._stopped:  # a job that cancelled its Periodic stays cancelled
            self._arm()

    def cancel(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def make_clock(kind: str) -> Clock:
    if kind == "manual":
        return ManualClock()
    if kind == "real":
        return RealClock()
    raise ValueError(f"clock must be one of {', '.join(CLOCK_KINDS)}, got {kind!r}")
