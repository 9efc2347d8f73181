# Retry policy of a pipeline and the topics it uses.
#
# Delays come from, in order: the handler's Retry(delay=...) or
# Retry(level=...), else the policy: an explicit list of delays (retry n
# waits delays[n-1], the last repeating), else the delay-level table (the
# seeds' `1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`) with
# level increment (retry n waits level n) or a fixed level.
#
# Retried records wait in one topic per delay *tier*
# (`<topic>-<subscription>-RETRY-<delay>`): every message of a tier has
# about the same delay, so the messages that are due form a prefix of the
# tier's log, which is what Spark's offset model can read. A delay between
# tiers goes to the next longer tier; a delay longer than every tier goes to
# the longest one and its DELAY_TIME property holds it back until due.
from __future__ import annotations

import re
from dataclasses import dataclass

from letterbox.client import dead_letter_topic_name, retry_topic_name
from letterbox.spark.options import full_topic_name
from letterbox.topic_name import TopicName

SEED_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
MAX_DELAY_S = 864_000.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class PolicyError(ValueError):
    """A retry policy setting cannot be used."""


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if not m:
        raise PolicyError(f"{text!r} is not a duration; write e.g. 500ms, 5s, 2m, 1h")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def duration_label(seconds: float) -> str:
    ms = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    delays: tuple[float, ...] | None = None
    delay_levels: tuple[float, ...] = tuple(parse_duration(x) for x in SEED_DELAY_LEVELS.split())
    level_increment: bool = True
    fixed_level: int = 1

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise PolicyError(f"max_retries must be >= 0, got {self.max_retries}")
        for d in (self.delays or ()) + self.delay_levels:
            if not 0 < d <= MAX_DELAY_S:
                raise PolicyError(f"delays must be more than 0 and at most {MAX_DELAY_S:.0f} s, got {d}")
        if not self.delay_levels:
            raise PolicyError("delay_levels must not be empty")
        if self.delays is not None and not self.delays:
            raise PolicyError("delays must not be empty (leave it unset to use the delay levels)")
        if not 1 <= self.fixed_level <= len(self.delay_levels):
            raise PolicyError(f"fixed_level must be between 1 and {len(self.delay_levels)}")

    def level_delay(self, level: int) -> float:
        return self.delay_levels[min(max(level, 1), len(self.delay_levels)) - 1]

    def policy_delay(self, retry: int) -> float:
        """Delay of the n-th retry (1-based) when the handler did not ask for one."""
        if self.delays is not None:
            return self.delays[min(retry, len(self.delays)) - 1]
        return self.level_delay(retry if self.level_increment else self.fixed_level)

    def tiers(self) -> tuple[float, ...]:
        return tuple(sorted({self.policy_delay(n) for n in range(1, max(self.max_retries, 1) + 1)}))

    def tier_for(self, delay: float) -> float:
        tiers = self.tiers()
        return next((t for t in tiers if t >= delay - 1e-9), tiers[-1])


@dataclass(frozen=True)
class PipelineTopics:
    source: str
    subscription: str
    dead_letter: str
    tiers: dict[float, str]  # delay in seconds -> tier topic

    @classmethod
    def build(
        cls, source: str, subscription: str, policy: RetryPolicy, dead_letter: str | None = None
    ) -> PipelineTopics:
        src = str(TopicName.parse(full_topic_name(source)).partitioned_parent)
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", subscription):
            raise PolicyError(f"subscription may hold letters, digits and _.- only, got {subscription!r}")
        retry = retry_topic_name(src, subscription)
        return cls(
            source=src,
            subscription=subscription,
            dead_letter=full_topic_name(dead_letter) if dead_letter else dead_letter_topic_name(src, subscription),
            tiers={d: f"{retry}-{duration_label(d)}" for d in policy.tiers()},
        )
