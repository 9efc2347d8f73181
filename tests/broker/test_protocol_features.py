"""Batch-index acks, pattern subscriptions, schemas and topic auto-creation settings."""
from __future__ import annotations

import re
import uuid

import pulsar
import pytest
from pulsar.schema import StringSchema

EARLIEST = pulsar.InitialPosition.Earliest


def topic_name(prefix: str = "pf") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def test_batch_index_ack_keeps_acked_siblings_acked(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=1000)
    consumer = client.subscribe(topic, "bia", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=EARLIEST, batch_index_ack_enabled=True)
    for i in range(10):
        producer.send_async(str(i).encode(), None)
    producer.flush()
    msgs = [consumer.receive(10_000) for _ in range(10)]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in msgs}) == 1, "one batch"
    for m in msgs:
        if int(m.data()) % 2 == 0:
            consumer.acknowledge(m)
    consumer.close()  # flushes the grouped acks; odd ones stay unacked
    consumer = client.subscribe(topic, "bia", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    again = []
    while True:
        try:
            m = consumer.receive(1000)
        except pulsar.Timeout:
            break
        again.append(int(m.data()))
        consumer.acknowledge(m)
    assert sorted(again) == [1, 3, 5, 7, 9]
    consumer.close()
    producer.close()


def test_pattern_subscription_finds_topics_of_namespace(client: pulsar.Client) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    topics = [f"persistent://public/default/{prefix}-{i}" for i in range(3)]
    for t in topics:
        p = client.create_producer(t)
        p.send(t.encode())
        p.close()
    consumer = client.subscribe(re.compile(f"persistent://public/default/{prefix}-.*"), "pat",
                                initial_position=EARLIEST)
    got = {consumer.receive(10_000).data().decode() for _ in range(3)}
    assert got == set(topics)
    consumer.close()


def test_schema_is_stored_and_served(client: pulsar.Client) -> None:
    topic = topic_name("schema")
    producer = client.create_producer(topic, schema=StringSchema())
    consumer = client.subscribe(topic, "s", schema=StringSchema(), initial_position=EARLIEST)
    producer.send("hello schema")
    msg = consumer.receive(10_000)
    assert msg.value() == "hello schema"
    assert msg.schema_version() is not None
    consumer.close()
    producer.close()


def test_auto_topic_creation_disabled(broker_factory: object) -> None:
    broker = broker_factory(env={"LETTERBOX_AUTO_TOPIC_CREATION": "false"})  # type: ignore[operator]
    client = pulsar.Client(broker.url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic_name("missing"))
    finally:
        client.close()
