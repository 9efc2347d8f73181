"""The failure core's policies, parser, naming, stamps and consumer properties (no broker)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from letterbox import message_properties as mp
from letterbox.failure import (
    FAILURE_KEYS,
    MAX_DELAY_SECONDS,
    REDRIVE_REMOVES,
    Backoff,
    DeadLetterPolicy,
    DelayLevels,
    PolicyError,
    PolicyOrigin,
    RetryPolicy,
    TopicRole,
    dead_letter_stamps,
    dead_letter_topic_name,
    declares_policy,
    duration_label,
    explicit_delay_ms,
    parse_duration_ms,
    policy_from_consumer_properties,
    reconsume_times,
    redriven_properties,
    retry_stamps,
    retry_tier_topic_name,
    retry_topic_name,
    topic_role,
    user_properties,
)
from letterbox.failure import consumer_properties as cp
from letterbox.failure.attempts import Attempt


@pytest.mark.parametrize(("text", "ms"), [
    ("500ms", 500), ("5s", 5000), ("5", 5000), ("2m", 120_000), ("1h", 3_600_000), ("1d", 86_400_000),
    ("1w", 7 * 86_400_000), (" 1.5s ", 1500), ("10S", 10_000),
])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "ten", "5x", "s", "-1s", "1 5s"])
def test_bad_durations_name_the_form(text: str) -> None:
    with pytest.raises(PolicyError, match="500ms, 5s"):
        parse_duration_ms(text)


def test_duration_options() -> None:
    assert parse_duration_ms("-1", allow_negative=True) == -1000
    assert parse_duration_ms("30", default_unit="ms") == 30
    with pytest.raises(PolicyError):
        parse_duration_ms("1.5h", whole=True)
    assert [duration_label(s) for s in (0.5, 5, 60, 90, 3600)] == ["500ms", "5s", "1m", "90s", "1h"]


def test_backoff_is_multiplier_redelivery_backoff() -> None:
    bo = Backoff()
    assert (bo.min_delay_ms, bo.max_delay_ms, bo.multiplier) == (1000, 60_000, 2.0)
    assert [bo.delay_ms(n) for n in range(8)] == [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]
    assert Backoff(100, 1000, 3.0).delay_ms(1000) == 1000


@pytest.mark.parametrize("args", [(0, 10, 2.0), (10, 5, 2.0), (10, 20, 0.5), (10, 20, 101.0), (1, 10**12, 2.0)])
def test_bad_backoffs(args: tuple[int, int, float]) -> None:
    with pytest.raises(PolicyError, match="backoff"):
        Backoff(*args)


def test_dead_letter_policy() -> None:
    with pytest.raises(PolicyError, match="at least 1"):
        DeadLetterPolicy(0)
    with pytest.raises(TypeError):
        DeadLetterPolicy(True)
    with pytest.raises(PolicyError, match="dead_letter_topic"):
        DeadLetterPolicy(1, dead_letter_topic=" ")


def test_delay_levels() -> None:
    seed = DelayLevels()
    assert len(seed) == 18 and seed.delay_ms(1) == 1000 and seed.delay_ms(18) == 7_200_000
    assert seed.for_attempt(0) == 1000 and seed.for_attempt(40) == 7_200_000
    assert DelayLevels([timedelta(seconds=2)]).levels_ms == (2000,)
    assert DelayLevels("1s 2s") == DelayLevels("1000ms 2000ms")
    for bad in ("", "0s", "1s 11d"):
        with pytest.raises(PolicyError):
            DelayLevels(bad)
    with pytest.raises(PolicyError, match="from 1 to 18"):
        seed.delay_ms(0)


def test_explicit_delays() -> None:
    assert explicit_delay_ms(1) == 1000
    assert explicit_delay_ms(timedelta(days=10)) == MAX_DELAY_SECONDS * 1000
    for bad in (0.999, MAX_DELAY_SECONDS + 1, True, "1"):
        with pytest.raises(PolicyError, match="delay must be"):
            explicit_delay_ms(bad)  # type: ignore[arg-type]


def test_retry_policy_delays_and_tiers() -> None:
    p = RetryPolicy(max_retries=4, delays=(0.5, 2.0))
    assert [p.policy_delay(n) for n in (1, 2, 3, 4)] == [0.5, 2.0, 2.0, 2.0]
    assert p.tiers() == (0.5, 2.0)
    assert p.tier_for(1.0) == 2.0 and p.tier_for(100) == 2.0 and p.tier_for(0) == 0.5
    seed = RetryPolicy()
    assert seed.max_retries == 3 and seed.tiers() == (1.0, 5.0, 10.0)
    assert RetryPolicy(level_increment=False, fixed_level=4).tiers() == (30.0,)
    assert RetryPolicy.from_levels(16, DelayLevels("1s 2s")).delay_levels == (1.0, 2.0)
    for kwargs in ({"max_retries": -1}, {"delays": ()}, {"delays": (0.0,)}, {"delay_levels": ()},
                   {"fixed_level": 19}, {"delays": (MAX_DELAY_SECONDS + 1.0,)}):
        with pytest.raises(PolicyError):
            RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_naming() -> None:
    t = "persistent://acme/ops/orders"
    assert dead_letter_topic_name(t, "billing") == t + "-billing-DLQ"
    assert dead_letter_topic_name(t + "-partition-3", "billing") == t + "-billing-DLQ"
    assert retry_topic_name(t + "-partition-0", "billing") == t + "-billing-RETRY"
    assert retry_tier_topic_name(t, "b", 0.5) == t + "-b-RETRY-500ms"
    assert topic_role(t) is TopicRole.SOURCE
    assert topic_role(t + "-billing-DLQ") is TopicRole.DEAD_LETTER
    assert topic_role(t + "-billing-DLQ-partition-1") is TopicRole.DEAD_LETTER
    assert topic_role(t + "-billing-RETRY") is TopicRole.RETRY
    assert topic_role(t + "-billing-RETRY-5s") is TopicRole.RETRY
    assert topic_role(t + "-DLQ-archive") is TopicRole.SOURCE


def test_stamps_table() -> None:
    props = {
        "user": "1", mp.REAL_TOPIC: "t", mp.ORIGIN_MESSAGE_ID: "1:2:-1:-1", mp.ORIGIN_PUBLISH_TIME: "5",
        **retry_stamps(3, 1000, "t-s-RETRY"),
        **dead_letter_stamps("terminated", 9, "s", 4, 1, 2, "why",
                             attempts=[Attempt(1, 2, "c", "127.0.0.1:1", "terminated", "why", "ValueError", "0123abcd4567")]),
        mp.PARKED_BEHIND: "1:1:-1:-1",  # the ordered quarantine's park adds it to a dead letter
        mp.EDIT_LOG: "[]",  # an edit-and-replay redrive's audit, kept by every later move
    }
    assert set(props) - {"user"} == FAILURE_KEYS  # every stamp a move can add is in the table
    assert redriven_properties(props) == {
        "user": "1", mp.REAL_TOPIC: "t", mp.ORIGIN_MESSAGE_ID: "1:2:-1:-1", mp.ORIGIN_PUBLISH_TIME: "5",
        mp.EDIT_LOG: "[]"}
    assert user_properties(props) == {"user": "1"}
    assert {mp.RECONSUMETIMES, mp.DELAY_TIME, mp.RETRY_TOPIC, mp.DEAD_LETTER_REASON} <= REDRIVE_REMOVES
    assert reconsume_times(props) == 3
    assert reconsume_times({}) == 0 and reconsume_times({mp.RECONSUMETIMES: "x"}) == 0
    assert dead_letter_stamps("expired", 9, "s") == {
        mp.DEAD_LETTER_REASON: "expired", mp.DEAD_LETTER_TIME: "9", mp.DEAD_LETTER_SUBSCRIPTION: "s"}


def test_consumer_properties_round_trip() -> None:
    dl = DeadLetterPolicy(3, dead_letter_topic="persistent://a/b/dlq", initial_subscription_name="ops")
    bo = Backoff(100, 800, 3.0)
    md = cp.consumer_properties_of(dl, bo)
    assert declares_policy(md) and not declares_policy({"other": "1"})
    policy = policy_from_consumer_properties(md)
    assert policy.dead_letter == dl and policy.backoff == bo and policy.origin is PolicyOrigin.TOPIC
    only_min = policy_from_consumer_properties({cp.BACKOFF_MIN_MS: "250"})
    assert only_min.backoff == Backoff(250, 60_000, 2.0) and only_min.dead_letter is None


@pytest.mark.parametrize(("md", "match"), [
    ({cp.BACKOFF_MIN_MS: "x"}, "must be an integer"),
    ({cp.BACKOFF_MIN_MS: "0"}, "at least 1"),
    ({cp.BACKOFF_MIN_MS: "10", cp.BACKOFF_MULTIPLIER: "500"}, "between 1 and 100"),
    ({cp.BACKOFF_MAX_MS: "10"}, "need letterbox.backoff.min_ms"),
    ({cp.DLQ_TOPIC: "x"}, "need letterbox.dlq.max_redeliveries"),
    ({cp.DLQ_MAX_REDELIVERIES: "0"}, "at least 1"),
])
def test_bad_consumer_properties(md: dict[str, str], match: str) -> None:
    with pytest.raises(PolicyError, match=match):
        policy_from_consumer_properties(md)
