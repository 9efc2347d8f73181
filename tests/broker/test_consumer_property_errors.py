"""A misspelled or badly valued `letterbox.*` consumer property refuses the
subscribe. The official client raises a bare NotAllowedError (it keeps the
server's message out of the exception), so the tests check the exception type
and that the message naming the key reaches the broker's log. (The client logs
it too, "Received error response from server: ResultNotAllowedError (...)", but
its logger is process-wide, set by the first Client, so no test here relies on it.)"""
from __future__ import annotations

import re
import time
import uuid

import pulsar
import pytest

from letterbox.failure import PolicyError, policy_from_consumer_properties
from tests.conftest import BrokerProcess

KNOWN = ("letterbox.backoff.min_ms", "letterbox.backoff.max_ms", "letterbox.backoff.multiplier",
         "letterbox.dlq.max_redeliveries", "letterbox.dlq.topic", "letterbox.dlq.initial_subscription")


def _broker_logged(broker: BrokerProcess, *texts: str, deadline: float = 10.0) -> str:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for line in list(broker.lines):
            if all(t in line for t in texts):
                return line
        time.sleep(0.05)
    raise AssertionError(f"no broker log line with {texts}:\n{broker.log()[-3000:]}")


def test_misspelled_key_refuses_the_subscribe_naming_it_and_the_known_keys(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"typo-{uuid.uuid4().hex[:8]}"
    with pytest.raises(pulsar.exceptions.NotAllowedError):
        client.subscribe(topic, "s", properties={"letterbox.dlq.max_redelivery": "3"})
    line = _broker_logged(broker, "unknown consumer property letterbox.dlq.max_redelivery:")
    assert all(k in line for k in KNOWN)
    # A correct spelling on the same topic is accepted.
    client.subscribe(topic, "s", properties={"letterbox.dlq.max_redeliveries": "3"}).close()


def test_bad_value_names_the_property_and_what_is_expected(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    with pytest.raises(pulsar.exceptions.NotAllowedError):
        client.subscribe(f"bad-{uuid.uuid4().hex[:8]}", "s", properties={"letterbox.dlq.max_redeliveries": "abc"})
    expected = "consumer property letterbox.dlq.max_redeliveries must be an integer of at least 1, got 'abc'"
    _broker_logged(broker, expected)


def test_other_properties_are_left_alone() -> None:
    # Keys outside the letterbox. prefix are the application's own.
    policy = policy_from_consumer_properties({"letterboxish": "x", "team": "ops",
                                              "letterbox.backoff.min_ms": "10"})
    assert policy.backoff is not None and policy.backoff.min_delay_ms == 10
    with pytest.raises(PolicyError, match=re.escape("letterbox.backoff.multiplier must be a number between 1 and 100")):
        policy_from_consumer_properties({"letterbox.backoff.min_ms": "10", "letterbox.backoff.multiplier": "x"})
