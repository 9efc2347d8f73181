# The failure-handling policies, one type each:
# - Backoff: Pulsar's MultiplierRedeliveryBackoff for nack / ack-timeout /
#   crash redeliveries: delay(n) = min(max, min * multiplier ** n), n the
#   redeliveries so far; with jitter `full` a random delay in [0, delay(n)],
#   with `equal` one in [delay(n)/2, delay(n)] (spreads the retries of many
#   messages that failed together).
# - DeadLetterPolicy: the Java client's DeadLetterPolicy (max redeliveries,
#   dead letter and retry topic names, the DLQ's initial subscription); the
#   broker, the admin namespace policy and the RetryConsumer all use it.
# - DelayLevels: the seeds' delay-level table (`1s 5s ... 2h`, level 1 first).
# - RetryPolicy: how a retry (reconsume_later, a pipeline Retry) is delayed
#   and how many are allowed: explicit delays, else levels (level increment
#   or a fixed level); also the delay tiers of the Spark pipeline.
# - KeyFailure: `continue` or `park` the later messages of a dead-lettered
#   message's key (the ordered quarantine, key_quarantine.py).
# - FailurePolicy: what one subscription runs under (dead letter + backoff + circuit breaker +
#   retry + key failure) and where it came from (the consumers of that topic, or the
#   namespace: see decide.py's guard).
# Every type validates itself in __post_init__ and raises PolicyError.
from __future__ import annotations

import enum
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from letterbox.failure.circuit import CircuitPolicy
from letterbox.failure.durations import parse_duration_ms
from letterbox.failure.errors import PolicyError
from letterbox.failure.limits import (
    DEFAULT_BACKOFF_MAX_DELAY_MS,
    DEFAULT_BACKOFF_MIN_DELAY_MS,
    DEFAULT_BACKOFF_MULTIPLIER,
    DEFAULT_DELAY_LEVELS,
    DEFAULT_PIPELINE_MAX_RETRIES,
    MAX_BACKOFF_MULTIPLIER,
    MAX_DELAY_MS,
    MAX_DELAY_SECONDS,
    MIN_DELAY_MS,
)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Jitter(enum.Enum):
    NONE = "none"
    FULL = "full"  # uniform in [0, delay]
    EQUAL = "equal"  # delay / 2 plus uniform in [0, delay / 2]


JITTER_VALUES = tuple(j.value for j in Jitter)


@dataclass(frozen=True)
class Backoff:
    """delay(n) = min(max, min * multiplier ** n) for a message redelivered n times so far,
    randomised by `jitter` (`rng`: the source of uniform numbers in [0, 1))."""

    min_delay_ms: int = DEFAULT_BACKOFF_MIN_DELAY_MS
    max_delay_ms: int = DEFAULT_BACKOFF_MAX_DELAY_MS
    multiplier: float = DEFAULT_BACKOFF_MULTIPLIER
    jitter: Jitter = Jitter.NONE
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _is_int(self.min_delay_ms) or self.min_delay_ms < 1:
            raise PolicyError(f"backoff min delay must be an integer of at least 1 ms, got {self.min_delay_ms!r}")
        if not _is_int(self.max_delay_ms) or self.max_delay_ms < self.min_delay_ms:
            raise PolicyError(
                f"backoff max delay must be an integer of at least the min delay ({self.min_delay_ms} ms), "
                f"got {self.max_delay_ms!r}"
            )
        if self.max_delay_ms > MAX_DELAY_MS:
            raise PolicyError(f"backoff max delay must be at most {MAX_DELAY_MS} ms, got {self.max_delay_ms}")
        if isinstance(self.multiplier, bool) or not isinstance(self.multiplier, int | float) \
                or not 1.0 <= self.multiplier <= MAX_BACKOFF_MULTIPLIER:
            raise PolicyError(f"backoff multiplier must be between 1 and 100, got {self.multiplier!r}")

    def delay_ms(self, redelivery_count: int) -> int:
        if redelivery_count <= 0:
            delay = self.min_delay_ms
        else:
            delay = int(min(self.min_delay_ms * self.multiplier ** min(redelivery_count, 64), self.max_delay_ms))
        if self.jitter is Jitter.FULL:
            return int(delay * self.rng())
        if self.jitter is Jitter.EQUAL:
            return delay - int(delay / 2 * self.rng())
        return delay


@dataclass(frozen=True)
class DeadLetterPolicy:
    """Where messages go when they have failed too often, or are terminated.

    `max_redeliver_count` bounds both retries (RECONSUMETIMES) and negative-ack /
    ack-timeout / crash redeliveries (the broker counts those). Topic names
    default to `<topic>-<subscription>-DLQ` and `<topic>-<subscription>-RETRY`
    in the source topic's namespace (naming.py).
    """

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    retry_letter_topic: str | None = None
    initial_subscription_name: str | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.max_redeliver_count):
            raise TypeError("max_redeliver_count must be an int")
        if self.max_redeliver_count < 1:
            raise PolicyError("max_redeliver_count must be at least 1")
        for name in ("dead_letter_topic", "retry_letter_topic", "initial_subscription_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise PolicyError(f"{name} must be a non-empty string or None, got {value!r}")


class DelayLevels:
    """A table of retry delays addressed by level (1-based), as in the seed's
    MESSAGE_DELAYLEVEL. Build one from text (`"1s 5s 1m"`, units ms/s/m/h/d)
    or from timedeltas; the default is the seed's table."""

    def __init__(self, levels: str | Sequence[timedelta] = DEFAULT_DELAY_LEVELS) -> None:
        if isinstance(levels, str):
            self._ms = tuple(parse_duration_ms(word) for word in levels.split())
        else:
            self._ms = tuple(round(d.total_seconds() * 1000) for d in levels)
        if not self._ms:
            raise PolicyError("a delay level table needs at least one level")
        if any(not 0 < ms <= MAX_DELAY_MS for ms in self._ms):
            raise PolicyError(f"delay levels must be more than 0 and at most {MAX_DELAY_SECONDS} s")

    def __len__(self) -> int:
        return len(self._ms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DelayLevels) and other._ms == self._ms

    def __hash__(self) -> int:
        return hash(self._ms)

    def __repr__(self) -> str:
        return f"DelayLevels({' '.join(f'{ms}ms' for ms in self._ms)!r})"

    @property
    def levels_ms(self) -> tuple[int, ...]:
        return self._ms

    def delay_ms(self, level: int) -> int:
        """The delay of `level` (1 = the first); raises PolicyError outside the table."""
        if not _is_int(level) or not 1 <= level <= len(self._ms):
            raise PolicyError(f"delay level must be an int from 1 to {len(self._ms)}, got {level!r}")
        return self._ms[level - 1]

    def clamped_ms(self, level: int) -> int:
        """The delay of `level`, levels outside the table taking the nearest one."""
        return self._ms[min(max(level, 1), len(self._ms)) - 1]

    def for_attempt(self, reconsume_times: int) -> int:
        """Level-increment backoff: the n-th retry waits the n-th level (the last one beyond)."""
        return self.clamped_ms(reconsume_times)


def explicit_delay_ms(delay: timedelta | float) -> int:
    """An explicit retry delay in ms; 1 s to 864,000 s, anything else is a PolicyError."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, bool) or not isinstance(delay, int | float):
        raise PolicyError(f"delay must be a timedelta or a number of seconds, got {delay!r}")
    else:
        seconds = float(delay)
    ms = round(seconds * 1000)
    if not MIN_DELAY_MS <= ms <= MAX_DELAY_MS:
        raise PolicyError(f"delay must be between 1 and {MAX_DELAY_SECONDS} seconds, got {seconds:g} s")
    return ms


def _seed_levels() -> tuple[float, ...]:
    return tuple(ms / 1000 for ms in DelayLevels().levels_ms)


@dataclass(frozen=True)
class RetryPolicy:
    """How retries are delayed and how many are allowed (seconds, as the pipeline API takes them).

    The n-th retry (1-based) waits `delays[n-1]` (the last repeating) when
    `delays` is set, else level n of `delay_levels` (level increment) or
    `fixed_level`. More than `max_retries` retries dead-letter the message.
    """

    max_retries: int = DEFAULT_PIPELINE_MAX_RETRIES
    delays: tuple[float, ...] | None = None
    delay_levels: tuple[float, ...] = field(default_factory=_seed_levels)
    level_increment: bool = True
    fixed_level: int = 1

    def __post_init__(self) -> None:
        if not _is_int(self.max_retries) or self.max_retries < 0:
            raise PolicyError(f"max_retries must be >= 0, got {self.max_retries}")
        for d in (self.delays or ()) + self.delay_levels:
            if not 0 < d <= MAX_DELAY_SECONDS:
                raise PolicyError(f"delays must be more than 0 and at most {MAX_DELAY_SECONDS} s, got {d}")
        if not self.delay_levels:
            raise PolicyError("delay_levels must not be empty")
        if self.delays is not None and not self.delays:
            raise PolicyError("delays must not be empty (leave it unset to use the delay levels)")
        if not 1 <= self.fixed_level <= len(self.delay_levels):
            raise PolicyError(f"fixed_level must be between 1 and {len(self.delay_levels)}")

    @classmethod
    def from_levels(cls, max_retries: int, levels: DelayLevels) -> RetryPolicy:
        """The RetryConsumer's policy: level increment over `levels`."""
        return cls(max_retries=max_retries, delay_levels=tuple(ms / 1000 for ms in levels.levels_ms))

    def level_delay(self, level: int) -> float:
        return self.delay_levels[min(max(level, 1), len(self.delay_levels)) - 1]

    def policy_delay(self, retry: int) -> float:
        """Delay of the n-th retry (1-based) when the caller did not ask for one."""
        if self.delays is not None:
            return self.delays[min(max(retry, 1), len(self.delays)) - 1]
        return self.level_delay(retry if self.level_increment else self.fixed_level)

    def tiers(self) -> tuple[float, ...]:
        """The distinct delays the policy gives (the pipeline's retry tier topics)."""
        return tuple(sorted({self.policy_delay(n) for n in range(1, max(self.max_retries, 1) + 1)}))

    def tier_for(self, delay: float) -> float:
        """The shortest tier at least `delay` long (the longest tier beyond them all)."""
        tiers = self.tiers()
        return next((t for t in tiers if t >= delay - 1e-9), tiers[-1])


class KeyFailure(enum.Enum):
    """What a dead-lettered message means for the later messages of its key
    (`letterbox.dlq.on_key_failure`; see key_quarantine.py)."""

    CONTINUE = "continue"  # they flow on (today's behaviour, the default)
    PARK = "park"  # they are parked behind it in the dead letter topic until it is redriven or purged


class PolicyOrigin(enum.Enum):
    """Where a subscription's policy was configured."""

    TOPIC = "topic"  # by the consumers of that topic (consumer properties, RetryConsumer, pipeline)
    NAMESPACE = "namespace"  # the namespace's letterbox_* policies


@dataclass(frozen=True)
class FailurePolicy:
    dead_letter: DeadLetterPolicy | None = None
    backoff: Backoff | None = None
    retry: RetryPolicy | None = None
    origin: PolicyOrigin = PolicyOrigin.TOPIC
    on_key_failure: KeyFailure = KeyFailure.CONTINUE
    circuit: CircuitPolicy | None = None  # outage detection (circuit.py); None: off
