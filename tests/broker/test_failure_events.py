"""The failure core's event table driven through the official client against a real broker, on
the four subscription types: nack, ack timeout, redeliver-all, consumer gone, max redeliveries ->
DLQ, backoff delay, terminate. Counts are kept on every type (Pulsar keeps them only on
Shared/Key_Shared). Small counts: one message per topic."""
from __future__ import annotations

import itertools
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from letterbox.client import (
    DeadLetterPolicy,
    RetryConsumer,
    TerminateWithoutDeadLetterPolicy,
    dead_letter_topic_name,
    message_id_text,
)
from letterbox.failure.consumer_properties import (
    BACKOFF_MAX_MS,
    BACKOFF_MIN_MS,
    DLQ_MAX_REDELIVERIES,
)
from tests.conftest import BrokerProcess

TYPES = {
    "Exclusive": pulsar.ConsumerType.Exclusive,
    "Failover": pulsar.ConsumerType.Failover,
    "Shared": pulsar.ConsumerType.Shared,
    "Key_Shared": pulsar.ConsumerType.KeyShared,
}
KINDS = list(TYPES)


def new_topic(event: str, kind: str) -> str:
    return f"persistent://public/default/ev-{event}-{kind.lower()}-{uuid.uuid4().hex[:6]}"


def send_one(client: pulsar.Client, topic: str, body: bytes = b"m") -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(body, partition_key="k")
    producer.close()


@pytest.fixture
def subscribe(client: pulsar.Client) -> Iterator[Any]:
    opened: list[pulsar.Consumer] = []

    def make(topic: str, kind: str, **kwargs: Any) -> pulsar.Consumer:
        kwargs.setdefault("negative_ack_redelivery_delay_ms", 50)
        c = client.subscribe(topic, "s", consumer_type=TYPES[kind],
                             initial_position=pulsar.InitialPosition.Earliest, **kwargs)
        opened.append(c)
        return c

    yield make
    for c in opened:
        if c.is_connected():  # not already closed by the test
            c.close()


def dead_letter(client: pulsar.Client, dlq: str) -> pulsar.Message:
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    try:
        return reader.read_next(15_000)
    finally:
        reader.close()


@pytest.mark.parametrize("kind", KINDS)
def test_nack_counts_a_redelivery(client: pulsar.Client, subscribe: Any, kind: str) -> None:
    topic = new_topic("nack", kind)
    consumer = subscribe(topic, kind)
    send_one(client, topic)
    counts = []
    for _ in range(3):
        msg = consumer.receive(10_000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    consumer.acknowledge(consumer.receive(10_000))
    assert counts == [0, 1, 2]


@pytest.mark.parametrize("kind", KINDS)
def test_redeliver_all_counts_a_redelivery(client: pulsar.Client, subscribe: Any, kind: str) -> None:
    topic = new_topic("all", kind)
    consumer = subscribe(topic, kind)
    send_one(client, topic)
    assert consumer.receive(10_000).redelivery_count() == 0
    consumer.redeliver_unacknowledged_messages()
    again = consumer.receive(10_000)
    assert again.redelivery_count() == 1
    consumer.acknowledge(again)


@pytest.mark.parametrize("kind", KINDS)
def test_consumer_gone_counts_the_message_it_held(client: pulsar.Client, subscribe: Any, kind: str) -> None:
    topic = new_topic("gone", kind)
    first = subscribe(topic, kind)
    send_one(client, topic)
    assert first.receive(10_000).redelivery_count() == 0
    first.close()  # gone holding it, unacknowledged
    second = subscribe(topic, kind)
    again = second.receive(10_000)
    assert again.redelivery_count() == 1
    second.acknowledge(again)


@pytest.mark.parametrize("kind", KINDS)
def test_max_redeliveries_dead_letters(client: pulsar.Client, subscribe: Any, kind: str) -> None:
    topic = new_topic("dlq", kind)
    consumer = subscribe(topic, kind, properties={DLQ_MAX_REDELIVERIES: "2"})
    send_one(client, topic, b"poison")
    counts = []
    for _ in range(3):  # deliveries 0, 1, 2; the third nack passes the maximum of 2 redeliveries
        msg = consumer.receive(10_000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    dead = dead_letter(client, dead_letter_topic_name(topic, "s"))
    assert dead.data() == b"poison"
    props = dead.properties()
    assert (props["DEAD_LETTER_REASON"], props["DELIVERY_COUNT"], props["REAL_TOPIC"]) == (
        "max-redeliveries", "3", topic)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1_000)


def delivery_times(broker: BrokerProcess, topic: str, message_id: str, count: int) -> list[int]:
    """The broker's delivery times (ms) of the first `count` attempts of `message_id` on
    subscription "s", from its attempt log (an attempt is logged once its nack arrives)."""
    url = (f"{broker.admin_url}/admin/v2/persistent/{topic.removeprefix('persistent://')}"
           f"/subscription/s/letterbox/attempts/{message_id}")
    deadline = time.monotonic() + 20
    while True:
        with urllib.request.urlopen(url, timeout=10) as resp:
            attempts = json.load(resp)["attempts"]
        if len(attempts) >= count or time.monotonic() > deadline:
            return [a["deliveredAt"] for a in attempts[:count]]
        time.sleep(0.05)


@pytest.mark.parametrize("kind", KINDS)
def test_backoff_delays_each_redelivery(
    broker: BrokerProcess, client: pulsar.Client, subscribe: Any, kind: str
) -> None:
    topic = new_topic("backoff", kind)
    consumer = subscribe(topic, kind, properties={BACKOFF_MIN_MS: "300", BACKOFF_MAX_MS: "600"})
    send_one(client, topic)
    stamps = []
    for _ in range(4):
        msg = consumer.receive(10_000)
        stamps.append(time.monotonic())
        consumer.negative_acknowledge(msg)
    # 300 ms, 600 ms, then capped at 600 ms, from the last delivery. "Never early" is judged on
    # the broker's own delivery times: the client's receive stamps carry its receive lag, which
    # made a 600 ms gap look like 574 ms at load 12 (the delivery before it was received late)
    delivered = delivery_times(broker, topic, message_id_text(msg), 4)
    assert len(delivered) == 4 and all(delivered), delivered
    broker_gaps = [b - a for a, b in itertools.pairwise(delivered)]
    for gap_ms, expected_ms in zip(broker_gaps, (300, 600, 600), strict=True):
        assert expected_ms <= gap_ms < expected_ms + 1500, broker_gaps
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    for gap, expected in zip(gaps, (0.3, 0.6, 0.6), strict=True):
        assert gap < expected + 1.5, gaps  # (generous upper margins for a loaded machine)


@pytest.mark.parametrize("kind", KINDS)
def test_terminate_dead_letters_at_once(broker: BrokerProcess, client: pulsar.Client, kind: str) -> None:
    topic = new_topic("term", kind)
    consumer = RetryConsumer(client, topic, "s", consumer_type=TYPES[kind], admin_url=broker.admin_url,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=5))
    plain = RetryConsumer(client, topic, "plain", consumer_type=TYPES[kind], admin_url=broker.admin_url,
                          enable_retry=False)
    try:
        send_one(client, topic, b"bad")
        msg = consumer.receive(10_000)
        consumer.terminate(msg, "unparseable")
        dead = dead_letter(client, dead_letter_topic_name(topic, "s")).properties()
        assert (dead["DEAD_LETTER_REASON"], dead["DEAD_LETTER_DESCRIPTION"]) == ("terminated", "unparseable")
        other = plain.receive(10_000)
        with pytest.raises(TerminateWithoutDeadLetterPolicy):
            plain.terminate(other)
        plain.acknowledge(other)  # untouched by the refused terminate
    finally:
        consumer.close()
        plain.close()


def test_ack_timeout_counts_a_redelivery_on_every_type(client: pulsar.Client, subscribe: Any) -> None:
    """One wait for the four types (the official client's ack timeout is at least 10 s)."""
    consumers = {}
    for kind in KINDS:
        topic = new_topic("acktimeout", kind)
        consumers[kind] = subscribe(topic, kind, unacked_messages_timeout_ms=10_000)
        send_one(client, topic)
    for consumer in consumers.values():
        assert consumer.receive(10_000).redelivery_count() == 0  # and never acknowledged
    counts = {}
    for kind, consumer in consumers.items():
        again = consumer.receive(30_000)
        counts[kind] = again.redelivery_count()
        consumer.acknowledge(again)
    assert counts == dict.fromkeys(KINDS, 1)
