"""decide(): every event x policy (x subscription type where it matters), no broker."""
from __future__ import annotations

from datetime import timedelta

import pytest

from letterbox.failure import (
    Acknowledge,
    AckTimeout,
    Backoff,
    ConsumerGone,
    DeadLetter,
    DeadLetterPolicy,
    Deliver,
    DeliverAt,
    DeliveryState,
    Dispatch,
    Expired,
    FailurePolicy,
    Nack,
    PipelineFail,
    PipelineRetry,
    PolicyError,
    PolicyOrigin,
    ReconsumeLater,
    RedeliverAll,
    Refuse,
    RetryPolicy,
    SubscriptionType,
    Terminate,
    TopicRole,
    decide,
    decide_redeliveries,
)

NOW = 1_700_000_000_000
LAST = NOW - 300
ALL_TYPES = list(SubscriptionType)
DL = DeadLetterPolicy(max_redeliver_count=2)
BO = Backoff(min_delay_ms=1000, max_delay_ms=4000, multiplier=2.0)
RETRY = RetryPolicy(max_retries=3, delays=(1.0, 5.0))

NONE = FailurePolicy()
DLQ = FailurePolicy(dead_letter=DL)
BACKOFF = FailurePolicy(backoff=BO)
BOTH = FailurePolicy(dead_letter=DL, backoff=BO)
NS_DLQ = FailurePolicy(dead_letter=DL, origin=PolicyOrigin.NAMESPACE)
WITH_RETRY = FailurePolicy(dead_letter=DL, retry=RETRY)

# (event, policy, redelivery count before, expected) — the same on every subscription type:
# redeliveries are counted and dead-lettered on all four (Pulsar counts only on Shared/Key_Shared).
BROKER_TABLE = [
    (Nack(), NONE, 0, Deliver(1)),
    (Nack(), NONE, 7, Deliver(8)),
    (Nack(), DLQ, 0, Deliver(1)),
    (Nack(), DLQ, 1, Deliver(2)),
    (Nack(), DLQ, 2, DeadLetter("max-redeliveries", 3)),
    (Nack(), BACKOFF, 0, DeliverAt(LAST + 1000, 1000, 1)),
    (Nack(), BACKOFF, 1, DeliverAt(LAST + 2000, 2000, 2)),
    (Nack(), BACKOFF, 2, DeliverAt(LAST + 4000, 4000, 3)),
    (Nack(), BACKOFF, 5, DeliverAt(LAST + 4000, 4000, 6)),  # capped at max
    (Nack(), BOTH, 1, DeliverAt(LAST + 2000, 2000, 2)),
    (Nack(), BOTH, 2, DeadLetter("max-redeliveries", 3)),
    (AckTimeout(), NONE, 0, Deliver(1)),
    (AckTimeout(), DLQ, 2, DeadLetter("max-redeliveries", 3)),
    (AckTimeout(), BACKOFF, 1, DeliverAt(LAST + 2000, 2000, 2)),
    (AckTimeout(), BOTH, 0, DeliverAt(LAST + 1000, 1000, 1)),
    (RedeliverAll(), NONE, 3, Deliver(4)),
    (RedeliverAll(), DLQ, 2, DeadLetter("max-redeliveries", 3)),
    (RedeliverAll(), BACKOFF, 0, DeliverAt(LAST + 1000, 1000, 1)),
    (RedeliverAll(), BOTH, 2, DeadLetter("max-redeliveries", 3)),
    # a crash counts one delivery for the message being processed, no backoff
    (ConsumerGone(), NONE, 0, Deliver(1)),
    (ConsumerGone(), DLQ, 1, Deliver(2)),
    (ConsumerGone(), DLQ, 2, DeadLetter("max-redeliveries", 3)),
    (ConsumerGone(), BACKOFF, 1, Deliver(2)),
    (ConsumerGone(), BOTH, 2, DeadLetter("max-redeliveries", 3)),
    # prefetched messages behind it are not counted
    (ConsumerGone(seen=False), NONE, 0, Deliver(0)),
    (ConsumerGone(seen=False), BOTH, 2, Deliver(2)),
    (Expired(), NONE, 1, Acknowledge(1)),
    (Expired(), BACKOFF, 1, Acknowledge(1)),
    (Expired(), DLQ, 1, DeadLetter("expired", 1)),
    (Expired(), BOTH, 0, DeadLetter("expired", 0)),
    (Expired(by_namespace_ttl=True), NS_DLQ, 0, DeadLetter("expired", 0)),
    (Terminate(), NONE, 0, Refuse("terminate needs a dead letter policy (PIP-372): set one on the consumer")),
    (Terminate(), BACKOFF, 0, Refuse("terminate needs a dead letter policy (PIP-372): set one on the consumer")),
    (Terminate("bad input"), DLQ, 1, DeadLetter("terminated", 1, "bad input")),
    (Terminate(), BOTH, 0, DeadLetter("terminated", 0)),
]


@pytest.mark.parametrize("sub_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("event", "policy", "before", "expected"), BROKER_TABLE)
def test_broker_events_on_every_subscription_type(
    sub_type: SubscriptionType, event: object, policy: FailurePolicy, before: int, expected: object
) -> None:
    state = DeliveryState(redelivery_count=before, first_delivery_ms=LAST - 1000, last_delivery_ms=LAST,
                          sub_type=sub_type)
    assert decide(state, event, policy, NOW) == expected  # type: ignore[arg-type]


def test_backoff_without_a_recorded_delivery_runs_from_now() -> None:
    assert decide(DeliveryState(), Nack(), BACKOFF, NOW) == DeliverAt(NOW + 1000, 1000, 1)


@pytest.mark.parametrize("event", [Nack(), AckTimeout(), RedeliverAll(), ConsumerGone(), Expired(), Terminate()])
def test_non_durable_subscriptions_never_dead_letter(event: object) -> None:
    out = decide(DeliveryState(redelivery_count=5, durable=False), event, BOTH, NOW)  # type: ignore[arg-type]
    assert not isinstance(out, DeadLetter)


@pytest.mark.parametrize(("sub_type", "delayed"), [
    (SubscriptionType.EXCLUSIVE, False), (SubscriptionType.FAILOVER, False),
    (SubscriptionType.SHARED, True), (SubscriptionType.KEY_SHARED, True),
])
def test_delayed_delivery_is_honoured_on_shared_and_key_shared_only(sub_type: SubscriptionType, delayed: bool) -> None:
    state = DeliveryState(sub_type=sub_type)
    out = decide(state, Dispatch(NOW + 5000), NONE, NOW)
    assert out == (DeliverAt(NOW + 5000, 5000, 0) if delayed else Deliver(0))
    assert decide(state, Dispatch(NOW - 1), NONE, NOW) == Deliver(0)
    assert decide(state, Dispatch(0), NONE, NOW) == Deliver(0)


# --- guards -----------------------------------------------------------------------------------
@pytest.mark.parametrize("role", [TopicRole.DEAD_LETTER, TopicRole.RETRY])
def test_namespace_policies_never_dead_letter_failure_topics(role: TopicRole) -> None:
    state = DeliveryState(redelivery_count=9, topic_role=role)
    assert decide(state, Nack(), NS_DLQ, NOW) == Deliver(10)
    assert decide(state, Expired(), NS_DLQ, NOW) == Acknowledge(9)
    assert isinstance(decide(state, Terminate(), NS_DLQ, NOW), Refuse)
    # a namespace TTL leaves them alone altogether
    assert decide(state, Expired(by_namespace_ttl=True), NS_DLQ, NOW) == Deliver(9)
    assert decide(state, Expired(by_namespace_ttl=True), NONE, NOW) == Deliver(9)


def test_a_source_topic_follows_the_namespace_policy() -> None:
    state = DeliveryState(redelivery_count=2)
    assert decide(state, Nack(), NS_DLQ, NOW) == DeadLetter("max-redeliveries", 3)
    assert decide(state, Expired(by_namespace_ttl=True), NONE, NOW) == Acknowledge(2)


def test_a_retry_topic_dead_letters_under_its_own_consumers_policy() -> None:
    state = DeliveryState(redelivery_count=2, topic_role=TopicRole.RETRY)
    assert decide(state, Nack(), DLQ, NOW) == DeadLetter("max-redeliveries", 3)


def test_a_dead_letter_topic_dead_letters_only_into_a_named_topic() -> None:
    state = DeliveryState(redelivery_count=2, topic_role=TopicRole.DEAD_LETTER)
    assert decide(state, Nack(), DLQ, NOW) == Deliver(3)  # would be <dlq>-<sub>-DLQ: never
    named = FailurePolicy(dead_letter=DeadLetterPolicy(2, dead_letter_topic="persistent://t/n/parking"))
    assert decide(state, Nack(), named, NOW) == DeadLetter("max-redeliveries", 3)


# --- retries: reconsume_later (strict) and the pipeline (lenient) -------------------------------
RETRY_TABLE = [
    # (event, RECONSUMETIMES before, expected)
    (ReconsumeLater(), 0, DeliverAt(NOW + 1000, 1000, 1)),
    (ReconsumeLater(), 1, DeliverAt(NOW + 5000, 5000, 2)),
    (ReconsumeLater(), 2, DeliverAt(NOW + 5000, 5000, 3)),  # the last delay repeats
    (ReconsumeLater(), 3, DeadLetter("max-redeliveries", 3)),
    (ReconsumeLater(delay=30), 0, DeliverAt(NOW + 30_000, 30_000, 1)),
    (ReconsumeLater(delay=timedelta(minutes=2)), 2, DeliverAt(NOW + 120_000, 120_000, 3)),
    (ReconsumeLater(level=2), 0, DeliverAt(NOW + 5000, 5000, 1)),
    (PipelineRetry(), 0, DeliverAt(NOW + 1000, 1000, 1)),
    (PipelineRetry(), 2, DeliverAt(NOW + 5000, 5000, 3)),
    (PipelineRetry(error="boom"), 3, DeadLetter("max-redeliveries", 3, "boom")),
    (PipelineRetry(delay=-5), 0, DeliverAt(NOW, 0, 1)),
    (PipelineRetry(delay=10**9), 0, DeliverAt(NOW + 864_000_000, 864_000_000, 1)),
    (PipelineRetry(level=99), 0, DeliverAt(NOW + 5000, 5000, 1)),
    (PipelineFail("bad"), 1, DeadLetter("terminated", 1, "bad")),
]


@pytest.mark.parametrize(("event", "times", "expected"), RETRY_TABLE)
def test_retries(event: object, times: int, expected: object) -> None:
    policy = FailurePolicy(retry=RetryPolicy(max_retries=3, delays=None, delay_levels=(1.0, 5.0)))
    assert decide(DeliveryState(reconsume_times=times), event, policy, NOW) == expected  # type: ignore[arg-type]


def test_reconsume_later_refuses_bad_requests() -> None:
    st = DeliveryState()
    for bad in (0.5, 864_001, timedelta(days=11), -1, "5s"):
        with pytest.raises(PolicyError, match="delay must be"):
            decide(st, ReconsumeLater(delay=bad), WITH_RETRY, NOW)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="delay level must be an int from 1 to 18"):
        decide(st, ReconsumeLater(level=19), FailurePolicy(retry=RetryPolicy(max_retries=3)), NOW)
    with pytest.raises(PolicyError, match="either a delay or a level"):
        decide(st, ReconsumeLater(delay=5, level=1), WITH_RETRY, NOW)
    assert isinstance(decide(st, ReconsumeLater(), DLQ, NOW), Refuse)  # no retry policy: retry is off


def test_retries_count_from_the_message_not_the_broker() -> None:
    """A redriven message has no RECONSUMETIMES: it gets every retry again."""
    state = DeliveryState(redelivery_count=40, reconsume_times=0)
    outs = []
    for _ in range(4):
        out = decide(state, ReconsumeLater(), WITH_RETRY, NOW)
        outs.append(out)
        if isinstance(out, DeliverAt):
            state = DeliveryState(reconsume_times=out.count)
    assert [type(o) for o in outs] == [DeliverAt, DeliverAt, DeliverAt, DeadLetter]


def test_pipeline_retry_without_retries_dead_letters() -> None:
    out = decide(DeliveryState(), PipelineRetry(error="x"), FailurePolicy(retry=RetryPolicy(max_retries=0)), NOW)
    assert out == DeadLetter("max-redeliveries", 0, "x")


def test_unknown_events_are_refused_loudly() -> None:
    with pytest.raises(TypeError):
        decide(DeliveryState(), object(), NONE, NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize("event", [Nack(), AckTimeout(), RedeliverAll(), ConsumerGone(seen=True),
                                   ConsumerGone(seen=False), Expired(), Terminate("x"), Dispatch(NOW + 5)])
@pytest.mark.parametrize("policy", [
    FailurePolicy(),
    FailurePolicy(dead_letter=DL),
    FailurePolicy(dead_letter=DL, backoff=BO),
    FailurePolicy(backoff=BO),
    FailurePolicy(dead_letter=DL, origin=PolicyOrigin.NAMESPACE),
])
@pytest.mark.parametrize("role", list(TopicRole))
@pytest.mark.parametrize("durable", [True, False])
def test_decide_redeliveries_gives_what_decide_gives_message_by_message(
        event: object, policy: FailurePolicy, role: TopicRole, durable: bool) -> None:
    """One decision for a whole redelivery request: the same outcome per message, in order."""
    counts = [0, 1, 2, 3, 7, 0, 2]
    lasts = [LAST, 0, LAST - 10, LAST, 5, 0, LAST]
    for sub_type in (SubscriptionType.SHARED, SubscriptionType.EXCLUSIVE):
        shared = DeliveryState(sub_type=sub_type, durable=durable, topic_role=role)
        got = decide_redeliveries(counts, lasts, shared, event, policy, NOW)  # type: ignore[arg-type]
        want = [decide(DeliveryState(redelivery_count=c, last_delivery_ms=t, sub_type=sub_type, durable=durable,
                                     topic_role=role), event, policy, NOW)  # type: ignore[arg-type]
                for c, t in zip(counts, lasts, strict=True)]
        assert got == want
    # a dead letter policy that applies: the counts past it are dead-lettered, the rest come back
    if durable and role is TopicRole.SOURCE and policy.dead_letter is not None \
            and isinstance(event, Nack) and policy.origin is not PolicyOrigin.NAMESPACE:
        assert [type(o) for o in got] == [
            DeliverAt if policy.backoff else Deliver, DeliverAt if policy.backoff else Deliver,
            DeadLetter, DeadLetter, DeadLetter, DeliverAt if policy.backoff else Deliver, DeadLetter]
