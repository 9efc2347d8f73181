# letterbox_dead_letter_rate: messages moved to a dead letter topic per second,
# averaged over the last WINDOW_SECONDS of the broker's clock (service.clock,
# so a test's manual clock ages it too), by dead-letter reason. Kept as
# one-second buckets per reason: recording is O(1), reading is O(window).
# Invariants: a bucket older than the window is never counted; a reason once
# seen stays reported (at 0 when idle), so its series does not vanish.
from __future__ import annotations

from collections import deque

from letterbox.clock import Clock

WINDOW_SECONDS = 60


class DeadLetterRate:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: dict[str, deque[list[int]]] = {}  # reason -> [second, messages], oldest first

    def record(self, reason: str, messages: int) -> None:
        second = self._clock.now_ms() // 1000
        buckets = self._buckets.setdefault(reason, deque())
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += messages
        else:
            buckets.append([second, messages])
        self._prune(buckets, second)

    def rates(self) -> list[tuple[str, float]]:
        """(reason, dead letters per second over the window), reasons in order."""
        second = self._clock.now_ms() // 1000
        out = []
        for reason in sorted(self._buckets):
            buckets = self._buckets[reason]
            self._prune(buckets, second)
            out.append((reason, sum(n for _, n in buckets) / WINDOW_SECONDS))
        return out

    @staticmethod
    def _prune(buckets: deque[list[int]], second: int) -> None:
        while buckets and buckets[0][0] <= second - WINDOW_SECONDS:
            buckets.popleft()
