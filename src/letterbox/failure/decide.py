# The one place where letterbox decides what happens to a message that failed
# or is held back: deliver it (again) now, deliver it at a time, dead-letter it
# (with a reason), acknowledge it (expired without a dead letter policy), or
# refuse the request. Pure: the caller passes the message's state, the event,
# the subscription's policy and the time, and applies the outcome.
#
# Counting: `count` of an outcome is the message's count after the event —
# redeliveries for broker events (nack, ack timeout, redeliver-all, consumer
# gone; kept on all four subscription types), RECONSUMETIMES for retries. A
# message is dead-lettered when the count passes the maximum (PIP-22: more
# than max_redeliver_count redeliveries). Backoff runs from the last delivery.
#
# Guards:
# - a namespace policy (origin NAMESPACE) never dead-letters a message of a
#   dead letter or retry topic, and a namespace TTL never expires one; only a
#   policy set by that topic's own consumers does;
# - a dead letter topic only dead-letters into a topic named explicitly, never
#   into a default `<dlq>-<sub>-DLQ`: no dead letter topic of a dead letter topic.
from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from letterbox.failure.error_classes import ErrorRule
from letterbox.failure.errors import PolicyError
from letterbox.failure.limits import MAX_DELAY_SECONDS
from letterbox.failure.naming import TopicRole
from letterbox.failure.policies import (
    Backoff,
    DeadLetterPolicy,
    FailurePolicy,
    PolicyOrigin,
    RetryPolicy,
    explicit_delay_ms,
)
from letterbox.message_properties import (
    REASON_EXPIRED,
    REASON_MAX_REDELIVERIES,
    REASON_NON_RETRYABLE,
    REASON_TERMINATED,
)


class SubscriptionType(enum.IntEnum):
    """Pulsar's subscription types, with their wire values."""

    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3


DELAYS_HONOURED = frozenset({SubscriptionType.SHARED, SubscriptionType.KEY_SHARED})


# --- the message's state ------------------------------------------------------------------
@dataclass(frozen=True)
class DeliveryState:
    redelivery_count: int = 0  # redeliveries counted by the broker before this event
    reconsume_times: int = 0  # RECONSUMETIMES of the message before this event
    first_delivery_ms: int = 0  # 0: never delivered
    last_delivery_ms: int = 0
    sub_type: SubscriptionType = SubscriptionType.SHARED
    durable: bool = True
    topic_role: TopicRole = TopicRole.SOURCE


# --- events --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Nack:
    """The consumer negatively acknowledged the message; `rule`: what a letterbox.client
    consumer said of its error class (error_classes.py), None for a plain nack."""

    rule: ErrorRule | None = None


@dataclass(frozen=True)
class AckTimeout:
    """The client's ack timeout ran out (it asks for redelivery of unacked messages)."""


@dataclass(frozen=True)
class RedeliverAll:
    """The consumer asked for all its unacked messages again."""


@dataclass(frozen=True)
class ConsumerGone:
    """The consumer crashed, closed or lost its connection holding the message.
    `seen`: the message it was most likely processing (its oldest pending one);
    prefetched messages behind it were never seen and are not counted."""

    seen: bool = True


@dataclass(frozen=True)
class Expired:
    """The message outlived a TTL: the namespace's (`by_namespace_ttl`) or an admin expire."""

    by_namespace_ttl: bool = False


@dataclass(frozen=True)
class Terminate:
    """PIP-372: dead-letter this message now, bypassing retries."""

    description: str | None = None


@dataclass(frozen=True)
class ReconsumeLater:
    """RetryConsumer.reconsume_later: strict bounds (explicit 1 to 864,000 s, a level in the table)."""

    delay: timedelta | float | None = None
    level: int | None = None


@dataclass(frozen=True)
class PipelineRetry:
    """A Spark pipeline handler's Retry (or exception): delays clamped to 0 to 864,000 s."""

    delay: float | None = None
    level: int | None = None
    error: str = ""


@dataclass(frozen=True)
class PipelineFail:
    """A Spark pipeline handler's Fail: dead-letter now."""

    error: str = ""


@dataclass(frozen=True)
class Dispatch:
    """A message is about to be dispatched; `deliver_at_ms` is its delayed-delivery time (0: none)."""

    deliver_at_ms: int = 0


Event = (
    Nack | AckTimeout | RedeliverAll | ConsumerGone | Expired | Terminate | ReconsumeLater
    | PipelineRetry | PipelineFail | Dispatch
)
REDELIVERY_EVENTS = (Nack, AckTimeout, RedeliverAll)


# --- outcomes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Deliver:
    """Deliver (again) now."""

    count: int = 0


@dataclass(frozen=True)
class DeliverAt:
    """Deliver at `at_ms` (epoch ms), `delay_ms` after the reference time."""

    at_ms: int
    delay_ms: int = 0
    count: int = 0


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    count: int = 0
    description: str | None = None


@dataclass(frozen=True)
class Acknowledge:
    """Drop it from the subscription (an expiry without a dead letter policy)."""

    count: int = 0


@dataclass(frozen=True)
class Refuse:
    """The request cannot be honoured (e.g. terminate without a dead letter policy)."""

    message: str


Outcome = Deliver | DeliverAt | DeadLetter | Acknowledge | Refuse


def dead_letter_policy_for(state: DeliveryState, policy: FailurePolicy) -> DeadLetterPolicy | None:
    """The dead letter policy that applies to the message, after the guards."""
    dl = policy.dead_letter
    if dl is None or not state.durable:
        return None
    if state.topic_role is not TopicRole.SOURCE and policy.origin is PolicyOrigin.NAMESPACE:
        return None
    if state.topic_role is TopicRole.DEAD_LETTER and dl.dead_letter_topic is None:
        return None
    return dl


def decide(state: DeliveryState, event: Event, policy: FailurePolicy, now_ms: int) -> Outcome:
    """What happens to one message on `event`; see the module comment."""
    if isinstance(event, Nack) and event.rule is not None:
        return _classified(state, event.rule, policy, now_ms)
    if isinstance(event, REDELIVERY_EVENTS):
        return _redelivered(state, policy, now_ms, backoff=True)
    if isinstance(event, ConsumerGone):
        if not event.seen:
            return Deliver(state.redelivery_count)
        return _redelivered(state, policy, now_ms, backoff=False)
    if isinstance(event, Expired):
        if event.by_namespace_ttl and state.topic_role is not TopicRole.SOURCE:
            return Deliver(state.redelivery_count)
        if dead_letter_policy_for(state, policy) is not None:
            return DeadLetter(REASON_EXPIRED, state.redelivery_count)
        return Acknowledge(state.redelivery_count)
    if isinstance(event, Terminate):
        if dead_letter_policy_for(state, policy) is None:
            return Refuse("terminate needs a dead letter policy (PIP-372): set one on the consumer")
        return DeadLetter(REASON_TERMINATED, state.redelivery_count, event.description)
    if isinstance(event, ReconsumeLater):
        return _reconsume_later(state, event, policy.retry, now_ms)
    if isinstance(event, PipelineRetry):
        return _pipeline_retry(state, event, policy.retry, now_ms)
    if isinstance(event, PipelineFail):
        return DeadLetter(REASON_TERMINATED, state.reconsume_times, event.error)
    if isinstance(event, Dispatch):
        if state.sub_type in DELAYS_HONOURED and event.deliver_at_ms > now_ms:
            return DeliverAt(event.deliver_at_ms, event.deliver_at_ms - now_ms, state.redelivery_count)
        return Deliver(state.redelivery_count)
    raise TypeError(f"not a failure event: {event!r}")


def decide_redeliveries(
    counts: Sequence[int],
    last_delivery_ms: Sequence[int],
    shared: DeliveryState,
    event: Event,
    policy: FailurePolicy,
    now_ms: int,
) -> list[Outcome]:
    """decide() for many messages of one subscription that come back on the same event
    (one nack round, ack timeout or redeliver-all request): `shared` holds what they have in
    common (subscription type, durability, topic role), `counts` and `last_delivery_ms` are
    each message's own redelivery count and last delivery time, in order. The outcomes are
    those decide() gives message by message; the dead letter policy is looked up once."""
    if isinstance(event, REDELIVERY_EVENTS) and not (isinstance(event, Nack) and event.rule is not None):
        backoff = policy.backoff
    elif isinstance(event, ConsumerGone) and event.seen:
        backoff = None
    else:  # (a nack with an error-class rule too: message by message)
        return [decide(replace(shared, redelivery_count=c, last_delivery_ms=t), event, policy, now_ms)
                for c, t in zip(counts, last_delivery_ms, strict=True)]
    dl = dead_letter_policy_for(shared, policy)
    limit = dl.max_redeliver_count if dl is not None else None
    return [_redelivery(c, t, limit, backoff, now_ms) for c, t in zip(counts, last_delivery_ms, strict=True)]


def _classified(state: DeliveryState, rule: ErrorRule, policy: FailurePolicy, now_ms: int) -> Outcome:
    """A nack whose error class has a rule: non-retryable dead-letters now, a class maximum
    of attempts replaces the policy's, retry-after sets the next delivery time (from now).
    Without a dead letter policy nothing is dead-lettered (the rule's delay still applies)."""
    dl = dead_letter_policy_for(state, policy)
    count = state.redelivery_count + 1
    if dl is not None:
        if rule.non_retryable:
            return DeadLetter(REASON_NON_RETRYABLE, count)
        # max_attempts failed attempts: the count (failures so far) reaches it
        if count > (rule.max_attempts - 1 if rule.max_attempts is not None else dl.max_redeliver_count):
            return _dead_letter(count)
    if rule.retry_after_ms is not None:
        return DeliverAt(now_ms + rule.retry_after_ms, rule.retry_after_ms, count)
    return _redelivery(state.redelivery_count, state.last_delivery_ms, None, policy.backoff, now_ms)


def _redelivered(state: DeliveryState, policy: FailurePolicy, now_ms: int, backoff: bool) -> Outcome:
    dl = dead_letter_policy_for(state, policy)
    return _redelivery(state.redelivery_count, state.last_delivery_ms,
                       dl.max_redeliver_count if dl is not None else None,
                       policy.backoff if backoff else None, now_ms)


def _redelivery(redeliveries: int, last_delivery_ms: int, limit: int | None, backoff: Backoff | None,
                now_ms: int) -> Outcome:
    """A message that comes back after `redeliveries` redeliveries; `limit`: the dead letter
    policy's max_redeliver_count (None: none applies)."""
    count = redeliveries + 1
    if limit is not None and count > limit:
        return _dead_letter(count)
    if backoff is not None:
        delay = backoff.delay_ms(redeliveries)
        # the delay runs from the last delivery, so a client's own nack delay
        # does not stretch the gaps between deliveries
        return DeliverAt((last_delivery_ms or now_ms) + delay, delay, count)
    return _deliver(count)


# outcomes are immutable: the common ones are made once per count
_deliver = functools.lru_cache(maxsize=64)(Deliver)
_dead_letter = functools.lru_cache(maxsize=64)(functools.partial(DeadLetter, REASON_MAX_REDELIVERIES))


def _reconsume_later(state: DeliveryState, event: ReconsumeLater, retry: RetryPolicy | None,
                     now_ms: int) -> Outcome:
    if retry is None:
        return Refuse("reconsume_later needs a consumer created with enable_retry=True")
    if event.delay is not None and event.level is not None:
        raise PolicyError("give either a delay or a level, not both")
    times = state.reconsume_times + 1
    if event.delay is not None:
        delay_ms = explicit_delay_ms(event.delay)
    elif event.level is not None:
        levels = retry.delay_levels
        if isinstance(event.level, bool) or not isinstance(event.level, int) or not 1 <= event.level <= len(levels):
            raise PolicyError(f"delay level must be an int from 1 to {len(levels)}, got {event.level!r}")
        delay_ms = round(levels[event.level - 1] * 1000)
    else:
        delay_ms = round(retry.policy_delay(times) * 1000)
    if times > retry.max_retries:
        return DeadLetter(REASON_MAX_REDELIVERIES, state.reconsume_times)
    return DeliverAt(now_ms + delay_ms, delay_ms, times)


def _pipeline_retry(state: DeliveryState, event: PipelineRetry, retry: RetryPolicy | None,
                    now_ms: int) -> Outcome:
    if retry is None:
        return DeadLetter(REASON_TERMINATED, state.reconsume_times, event.error or None)
    times = state.reconsume_times + 1
    if times > retry.max_retries:
        return DeadLetter(REASON_MAX_REDELIVERIES, state.reconsume_times, event.error or None)
    if event.delay is not None:
        seconds = min(max(event.delay, 0.0), float(MAX_DELAY_SECONDS))
    elif event.level is not None:
        seconds = retry.level_delay(event.level)
    else:
        seconds = retry.policy_delay(times)
    delay_ms = round(seconds * 1000)
    return DeliverAt(now_ms + delay_ms, delay_ms, times)
