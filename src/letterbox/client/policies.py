# What a retrying consumer is configured with: the dead letter policy (the
# Java client's DeadLetterPolicy: max redeliveries, DLQ and retry topic names,
# the DLQ's initial subscription) and the delay levels of the managed-service
# seed (`1s 5s 10s 30s 1m ... 2h`, level 1 = the first), with the explicit
# delay range of delayed messages, 1 s to 864,000 s.
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_MAX_RECONSUME_TIMES = 16  # used when retry is on and no dead letter policy is given
MIN_DELAY_MS = 1_000
MAX_DELAY_MS = 864_000_000
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_RE = re.compile(r"^(\d+)(ms|s|m|h|d)$")


@dataclass(frozen=True)
class DeadLetterPolicy:
    """Where messages go when they have failed too often, or are terminated.

    `max_redeliver_count` bounds both `reconsume_later` retries (RECONSUMETIMES)
    and negative-ack / ack-timeout redeliveries (the broker counts those).
    Topic names default to `<topic>-<subscription>-DLQ` and
    `<topic>-<subscription>-RETRY` in the source topic's namespace.
    """

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    retry_letter_topic: str | None = None
    initial_subscription_name: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_redeliver_count, bool) or not isinstance(self.max_redeliver_count, int):
            raise TypeError("max_redeliver_count must be an int")
        if self.max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be at least 1")


class DelayLevels:
    """A table of retry delays addressed by level (1-based), as in the seed's
    MESSAGE_DELAYLEVEL. Build one from text (`"1s 5s 1m"`, units ms/s/m/h/d)
    or from timedeltas; the default is the seed's table."""

    def __init__(self, levels: str | Sequence[timedelta] = DEFAULT_DELAY_LEVELS) -> None:
        if isinstance(levels, str):
            self._ms = [_parse_level(word) for word in levels.split()]
        else:
            self._ms = [int(d.total_seconds() * 1000) for d in levels]
        if not self._ms:
            raise ValueError("a delay level table needs at least one level")
        if any(ms <= 0 for ms in self._ms):
            raise ValueError("delay levels must be positive")

    def __len__(self) -> int:
        return len(self._ms)

    def delay_ms(self, level: int) -> int:
        """The delay of `level` (1 = the first); raises ValueError outside the table."""
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(self._ms):
            raise ValueError(f"delay level must be an int from 1 to {len(self._ms)}, got {level!r}")
        return self._ms[level - 1]

    def for_attempt(self, reconsume_times: int) -> int:
        """Level-increment backoff: the n-th retry waits the n-th level (the last one beyond)."""
        return self._ms[min(max(reconsume_times, 1), len(self._ms)) - 1]


def explicit_delay_ms(delay: timedelta | float) -> int:
    """An explicit retry delay in ms; 1 s to 864,000 s, anything else is a ValueError."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, bool) or not isinstance(delay, int | float):
        raise ValueError(f"delay must be a timedelta or a number of seconds, got {delay!r}")
    else:
        seconds = float(delay)
    ms = round(seconds * 1000)
    if not MIN_DELAY_MS <= ms <= MAX_DELAY_MS:
        raise ValueError(f"delay must be between 1 and 864000 seconds, got {seconds:g} s")
    return ms


def _parse_level(word: str) -> int:
    m = _LEVEL_RE.match(word.strip().lower())
    if not m:
        raise ValueError(f"bad delay level {word!r}: write a number and a unit (ms, s, m, h, d), e.g. 5s")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]
