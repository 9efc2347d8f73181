"""Produce/consume through the official pulsar-client against a real broker."""
from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from tests.conftest import wait_until


def topic_name(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("batching", [False, True])
def test_message_components_arrive_intact(client: pulsar.Client, batching: bool) -> None:
    topic = topic_name()
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name=f"prod-{batching}", batching_enabled=batching)
    before = int(time.time() * 1000)
    sent = []
    for i in range(20):
        props = {"index": str(i), "kind": "test"}
        kwargs = dict(properties=props, partition_key=f"key-{i % 3}", ordering_key=f"ok-{i}",
                      event_timestamp=1_700_000_000_000 + i, sequence_id=100 + i)
        if batching:
            producer.send_async(f"payload-{i}".encode(), lambda res, mid: None, **kwargs)
        else:
            sent.append(producer.send(f"payload-{i}".encode(), **kwargs))
    producer.flush()
    for i in range(20):
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == f"payload-{i}".encode()
        assert msg.properties() == {"index": str(i), "kind": "test"}
        assert msg.partition_key() == f"key-{i % 3}"
        assert msg.ordering_key() in (f"ok-{i}", f"ok-{i}".encode())
        assert msg.event_timestamp() == 1_700_000_000_000 + i
        assert msg.producer_name() == f"prod-{batching}"
        assert before - 1000 <= msg.publish_timestamp() <= int(time.time() * 1000) + 1000
        assert msg.redelivery_count() == 0
        assert msg.topic_name() == topic
        if not batching:
            assert str(msg.message_id()) == str(sent[i])
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=200)
    producer.close()
    consumer.close()


def test_many_batched_messages_in_order(client: pulsar.Client) -> None:
    topic = topic_name()
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                                      block_if_queue_full=True)
    n = 5000
    failures: list[object] = []
    for i in range(n):
        producer.send_async(str(i).encode(), lambda res, mid: failures.append(res) if res != pulsar.Result.Ok else None)
    producer.flush()
    assert failures == []
    got = []
    for _ in range(n):
        msg = consumer.receive(timeout_millis=10_000)
        got.append(int(msg.data()))
        consumer.acknowledge(msg)
    assert got == list(range(n))
    producer.close()
    consumer.close()


def test_sequence_ids_are_assigned_and_user_given_ones_kept(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=False)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    producer.send(b"a")
    producer.send(b"b", sequence_id=41)
    producer.send(b"c")
    datas = [reader.read_next(10_000).data() for _ in range(3)]
    assert datas == [b"a", b"b", b"c"]
    reader.close()
    producer.close()


def test_generated_producer_names_are_unique(client: pulsar.Client) -> None:
    topic = topic_name()
    p1 = client.create_producer(topic)
    p2 = client.create_producer(topic)
    assert p1.producer_name() and p2.producer_name()
    assert p1.producer_name() != p2.producer_name()
    p1.close()
    p2.close()


def test_short_topic_names_map_to_public_default(client: pulsar.Client) -> None:
    local = f"short-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(local)
    consumer = client.subscribe(f"persistent://public/default/{local}", "s",
                                initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"hello")
    assert consumer.receive(10_000).data() == b"hello"
    producer.close()
    consumer.close()


def test_invalid_topic_name_is_refused(client: pulsar.Client) -> None:
    with pytest.raises(pulsar.PulsarException):
        client.create_producer("persistent://only-tenant/topic")
    with pytest.raises(pulsar.PulsarException):
        client.create_producer("bogus-domain://public/default/t")


def test_large_message_accepted_and_oversized_refused(client: pulsar.Client) -> None:
    topic = topic_name()
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    big = bytes(range(256)) * (int(4.9 * 1024 * 1024) // 256)
    producer.send(big)
    msg = consumer.receive(timeout_millis=20_000)
    assert msg.data() == big
    consumer.acknowledge(msg)
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024))
    # the producer and topic keep working after the refusal
    producer.send(b"after")
    assert consumer.receive(timeout_millis=10_000).data() == b"after"
    producer.close()
    consumer.close()


def test_initial_position_latest_skips_existing(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"old")
    consumer = client.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Latest)
    producer.send(b"new")
    assert consumer.receive(10_000).data() == b"new"
    consumer.close()
    producer.close()


def test_non_persistent_topic_dispatch_or_drop(client: pulsar.Client) -> None:
    topic = f"non-persistent://public/default/np-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"dropped: nobody listens")
    consumer = client.subscribe(topic, "sub")
    assert wait_until(lambda: consumer.is_connected())
    producer.send(b"delivered")
    assert consumer.receive(10_000).data() == b"delivered"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    consumer.close()
    producer.close()
