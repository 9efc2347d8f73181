"""The pure half of failure events (letterbox.failure.events): the topic's name, the policy's
checks, the event's shape and its size bound."""
from __future__ import annotations

import json

import pytest

from letterbox.failure import PolicyError
from letterbox.failure.events import (
    MAX_EVENT_BYTES,
    MAX_REASON_CHARS,
    FailureEventsPolicy,
    encode_event,
    events_topic_name,
    failure_event,
    is_failure_events_topic,
)


def test_the_topic_of_a_namespace() -> None:
    name = events_topic_name("acme/orders")
    assert name == "persistent://acme/orders/__letterbox_failure_events"
    assert is_failure_events_topic(name) and is_failure_events_topic(name + "-partition-2")
    assert not is_failure_events_topic("persistent://acme/orders/orders-S-DLQ")


def test_policy_defaults_and_checks() -> None:
    assert FailureEventsPolicy().enabled is False
    policy = FailureEventsPolicy.from_json({})
    assert policy.enabled and policy.retention_ms == 7 * 24 * 3_600_000 and policy.retention_bytes == 100 * 2**20
    forever = FailureEventsPolicy.from_json({"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    assert (forever.retention_ms, forever.retention_bytes) == (-1, -1)
    assert FailureEventsPolicy.from_json(policy.to_json()) == policy
    for doc, field in (([], "JSON object"), ({"enabled": 1}, "enabled"), ({"retentionTimeInMinutes": 0},
                       "retentionTimeInMinutes"), ({"retentionSizeInMB": 1.5}, "retentionSizeInMB"),
                       ({"retention": 1}, "unknown field")):
        with pytest.raises(PolicyError) as info:
            FailureEventsPolicy.from_json(doc)
        assert field in str(info.value)


def test_events_are_small_json() -> None:
    ev = failure_event("nack", time_ms=5, topic="persistent://a/b/t", subscription="s", message_id="1:2:-1:-1",
                       reason="x" * 2_000, consumer="c1", description=None)
    assert len(ev["reason"]) == MAX_REASON_CHARS + 1 and "description" not in ev
    assert json.loads(encode_event(ev))["consumer"] == "c1"
    big = {**ev, "changes": ["set:" + "k" * 100] * 100}
    data = encode_event(big)
    assert len(data) <= MAX_EVENT_BYTES and json.loads(data)["truncated"] is True
    with pytest.raises(ValueError, match="unknown failure event type"):
        failure_event("exploded", time_ms=0, topic="t", subscription=None, message_id=None)
