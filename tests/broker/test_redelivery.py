"""Redelivery counts: kept with the cursor, on every subscription type, across
reconnects and broker crashes."""
from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.conftest import BrokerProcess

TYPES = {
    "exclusive": pulsar.ConsumerType.Exclusive,
    "shared": pulsar.ConsumerType.Shared,
    "failover": pulsar.ConsumerType.Failover,
    "key_shared": pulsar.ConsumerType.KeyShared,
}


def subscribe(client: pulsar.Client, topic: str, kind: str) -> pulsar.Consumer:
    return client.subscribe(topic, f"sub-{kind}", consumer_type=TYPES[kind],
                            initial_position=pulsar.InitialPosition.Earliest,
                            negative_ack_redelivery_delay_ms=50)


@pytest.mark.parametrize("kind", list(TYPES))
def test_nack_counts_continue_across_reconnect_and_crash(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    topic = f"persistent://public/default/rc-{kind}-{uuid.uuid4().hex[:6]}"
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"poison", partition_key="k")
        consumer = subscribe(client, topic, kind)
        for expected in range(4):
            msg = consumer.receive(10_000)
            assert msg.data() == b"poison"
            assert msg.redelivery_count() == expected
            if expected < 3:
                consumer.negative_acknowledge(msg)
        # close while holding it: the count continues (one more delivery counted)
        consumer.close()
        consumer = subscribe(client, topic, kind)
        msg = consumer.receive(10_000)
        assert msg.redelivery_count() == 4
        consumer.negative_acknowledge(msg)
        msg = consumer.receive(10_000)
        assert msg.redelivery_count() == 5
        broker.kill()  # SIGKILL while the consumer holds the message: a crash counts nothing
    finally:
        with contextlib.suppress(pulsar.PulsarException):  # its broker is gone
            client.close()

    broker = BrokerProcess(data).start()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        consumer = subscribe(client, topic, kind)
        msg = consumer.receive(10_000)
        assert msg.data() == b"poison"
        assert msg.redelivery_count() == 5, "the count must survive a broker crash"
        consumer.negative_acknowledge(msg)
        assert consumer.receive(10_000).redelivery_count() == 6
    finally:
        client.close()
        broker.stop()


def test_prefetched_messages_are_not_counted_on_disconnect(client: pulsar.Client) -> None:
    topic = f"persistent://public/default/prefetch-{uuid.uuid4().hex[:6]}"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(str(i).encode())
    consumer = client.subscribe(topic, "pf", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    first = consumer.receive(10_000)  # the others sit prefetched in the client's queue
    assert first.data() == b"0"
    consumer.close()
    consumer = client.subscribe(topic, "pf", consumer_type=pulsar.ConsumerType.Shared)
    counts = {}
    for _ in range(5):
        m = consumer.receive(10_000)
        counts[m.data()] = m.redelivery_count()
        consumer.acknowledge(m)
    assert counts == {b"0": 1, b"1": 0, b"2": 0, b"3": 0, b"4": 0}
    consumer.close()
    producer.close()


def test_acked_messages_are_never_redelivered_by_ack_timeout(client: pulsar.Client) -> None:
    topic = f"persistent://public/default/ackto-{uuid.uuid4().hex[:6]}"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(4):
        producer.send(str(i).encode())
    consumer = client.subscribe(topic, "to", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                unacked_messages_timeout_ms=10_000)
    got = [consumer.receive(10_000) for _ in range(4)]
    consumer.acknowledge(got[0])
    consumer.acknowledge(got[2])
    redelivered = [consumer.receive(20_000) for _ in range(2)]
    assert sorted((m.data(), m.redelivery_count()) for m in redelivered) == [(b"1", 1), (b"3", 1)]
    consumer.acknowledge(redelivered[0])  # one of them is acked late; the other times out again
    last = consumer.receive(20_000)
    assert last.data() == redelivered[1].data()
    assert last.redelivery_count() == 2
    consumer.acknowledge(last)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1000)
    consumer.close()
    producer.close()
