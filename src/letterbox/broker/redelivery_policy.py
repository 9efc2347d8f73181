# Per-subscription failure-handling policy: redelivery backoff (the seeds'
# MultiplierRedeliveryBackoff) and broker-side dead lettering (PIP-22). Set by
# consumers at subscribe time through consumer metadata (the official
# client's `properties=`), under the keys below; as PIP-22 says, the last
# created consumer's configuration wins. A consumer that sets none of the
# keys leaves the subscription's policy as it is.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from letterbox.errors import NotAllowed

BACKOFF_MIN_MS = "letterbox.backoff.min_ms"
BACKOFF_MAX_MS = "letterbox.backoff.max_ms"
BACKOFF_MULTIPLIER = "letterbox.backoff.multiplier"
DLQ_MAX_REDELIVERIES = "letterbox.dlq.max_redeliveries"
DLQ_TOPIC = "letterbox.dlq.topic"
DLQ_INITIAL_SUBSCRIPTION = "letterbox.dlq.initial_subscription"
KEYS = (BACKOFF_MIN_MS, BACKOFF_MAX_MS, BACKOFF_MULTIPLIER, DLQ_MAX_REDELIVERIES, DLQ_TOPIC,
        DLQ_INITIAL_SUBSCRIPTION)

DEFAULT_MAX_DELAY_MS = 60_000
DEFAULT_MULTIPLIER = 2.0


@dataclass(frozen=True)
class RedeliveryBackoff:
    """delay(n) = min(max, min * multiplier ** n) for a message redelivered n times so far."""

    min_delay_ms: int
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    multiplier: float = DEFAULT_MULTIPLIER

    def delay_ms(self, redelivery_count: int) -> int:
        if redelivery_count <= 0:
            return self.min_delay_ms
        delay = self.min_delay_ms * self.multiplier ** min(redelivery_count, 64)
        return int(min(delay, self.max_delay_ms))


@dataclass(frozen=True)
class DeadLetterPolicy:
    max_redeliveries: int
    topic: str | None = None
    initial_subscription: str | None = None


@dataclass(frozen=True)
class SubscriptionPolicy:
    backoff: RedeliveryBackoff | None = None
    dead_letter: DeadLetterPolicy | None = None

    @staticmethod
    def declared_in(metadata: Mapping[str, str]) -> bool:
        return any(k in metadata for k in KEYS)

    @classmethod
    def from_consumer_metadata(cls, md: Mapping[str, str]) -> SubscriptionPolicy:
        backoff = None
        if BACKOFF_MIN_MS in md:
            low = _int(md, BACKOFF_MIN_MS, 1)
            high = _int(md, BACKOFF_MAX_MS, low) if BACKOFF_MAX_MS in md else max(low, DEFAULT_MAX_DELAY_MS)
            mult = _float(md, BACKOFF_MULTIPLIER) if BACKOFF_MULTIPLIER in md else DEFAULT_MULTIPLIER
            backoff = RedeliveryBackoff(low, high, mult)
        elif BACKOFF_MAX_MS in md or BACKOFF_MULTIPLIER in md:
            raise NotAllowed(f"{BACKOFF_MAX_MS} and {BACKOFF_MULTIPLIER} need {BACKOFF_MIN_MS} as well")
        dead_letter = None
        if DLQ_MAX_REDELIVERIES in md:
            dead_letter = DeadLetterPolicy(
                _int(md, DLQ_MAX_REDELIVERIES, 1),
                md.get(DLQ_TOPIC) or None,
                md.get(DLQ_INITIAL_SUBSCRIPTION) or None,
            )
        elif DLQ_TOPIC in md or DLQ_INITIAL_SUBSCRIPTION in md:
            raise NotAllowed(f"{DLQ_TOPIC} and {DLQ_INITIAL_SUBSCRIPTION} need {DLQ_MAX_REDELIVERIES} as well")
        return cls(backoff, dead_letter)


def _int(md: Mapping[str, str], key: str, minimum: int) -> int:
    try:
        value = int(md[key])
    except ValueError:
        raise NotAllowed(f"consumer property {key} must be an integer, got {md[key]!r}") from None
    if value < minimum:
        raise NotAllowed(f"consumer property {key} must be at least {minimum}, got {value}")
    return value


def _float(md: Mapping[str, str], key: str) -> float:
    try:
        value = float(md[key])
    except ValueError:
        raise NotAllowed(f"consumer property {key} must be a number, got {md[key]!r}") from None
    if not 1.0 <= value <= 100.0:
        raise NotAllowed(f"consumer property {key} must be between 1 and 100, got {value}")
    return value
