"""Partitioned topics: metadata, routing over partitions, consuming all of them."""
from __future__ import annotations

import uuid

import pulsar


def test_auto_created_partitioned_topic(broker_factory: object) -> None:
    broker = broker_factory(env={  # type: ignore[operator]
        "LETTERBOX_AUTO_TOPIC_CREATION_TYPE": "partitioned",
        "LETTERBOX_DEFAULT_NUM_PARTITIONS": "3",
    })
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/parts-{uuid.uuid4().hex[:8]}"
        partitions = client.get_topic_partitions(topic)
        assert partitions == [f"{topic}-partition-{i}" for i in range(3)]
        consumer = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(
            topic, batching_enabled=False, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution
        )
        for i in range(30):
            producer.send(str(i).encode())
        got = []
        seen_topics = set()
        for _ in range(30):
            msg = consumer.receive(10_000)
            got.append(int(msg.data()))
            seen_topics.add(msg.topic_name())
            consumer.acknowledge(msg)
        assert sorted(got) == list(range(30))
        assert seen_topics == set(partitions)
        # a partition is an ordinary topic of its own
        reader = client.create_reader(partitions[0], pulsar.MessageId.earliest)
        assert reader.read_next(10_000).data() is not None
        reader.close()
        producer.close()
        consumer.close()
    finally:
        client.close()


def test_non_partitioned_topic_reports_zero_partitions(client: pulsar.Client) -> None:
    topic = f"persistent://public/default/plain-{uuid.uuid4().hex[:8]}"
    assert client.get_topic_partitions(topic) == [topic]
