"""The official client's own dead letter policy, driven by the broker's redelivery counts."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar
import pytest


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_client_side_dlq_moves_each_poison_message_once(client: pulsar.Client, kind: pulsar.ConsumerType) -> None:
    topic = f"persistent://public/default/cdlq-{uuid.uuid4().hex[:6]}"
    sub = "work"
    dlq_topic = f"{topic}-{sub}-DLQ"
    consumer = client.subscribe(
        topic, sub, consumer_type=kind, initial_position=pulsar.InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=50,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=3,
                                                           initial_subscription_name="dlq-audit"),
    )
    producer = client.create_producer(topic, batching_enabled=False)
    poison = {b"p1", b"p2"}
    for i in range(8):
        body = f"ok{i}".encode() if i not in (2, 5) else (b"p1" if i == 2 else b"p2")
        producer.send(body, partition_key=f"key-{i}", ordering_key=f"ord-{i}",
                      properties={"i": str(i), "kind": "poison" if body in poison else "fine"})
    acked = set()
    seen_counts: dict[bytes, list[int]] = {b"p1": [], b"p2": []}
    while True:
        try:
            msg = consumer.receive(3000)
        except pulsar.Timeout:
            break
        if msg.data() in poison:
            seen_counts[msg.data()].append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
        else:
            acked.add(msg.data())
            consumer.acknowledge(msg)
    assert acked == {f"ok{i}".encode() for i in range(8) if i not in (2, 5)}
    for body in poison:
        assert seen_counts[body] == [0, 1, 2, 3]
    dlq = client.subscribe(dlq_topic, "dlq-audit")
    moved = {}
    while True:
        try:
            m = dlq.receive(2000)
        except pulsar.Timeout:
            break
        assert m.data() not in moved, "a message reached the DLQ twice"
        moved[m.data()] = m
        dlq.acknowledge(m)
    assert set(moved) == poison
    m = moved[b"p1"]
    assert m.partition_key() == "key-2"
    assert m.ordering_key() in ("ord-2", b"ord-2")
    assert m.properties()["i"] == "2" and m.properties()["kind"] == "poison"
    assert m.properties()["REAL_TOPIC"] == topic
    assert m.properties()["ORIGIN_MESSAGE_ID"]
    dlq.close()
    consumer.close()
    producer.close()


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover])
def test_client_side_dlq_on_ordered_subscription_keeps_reaching_the_application(
        client: pulsar.Client, broker: Any, kind: pulsar.ConsumerType) -> None:
    """The official client has no dead letter path on Exclusive/Failover and hands back, unseen,
    a message counted above its max_redeliver_count: that hand-back is not counted, the message
    comes again with the highest count the client keeps, the messages behind it are not held,
    and it never loops between broker and client."""
    import json
    import urllib.request

    topic = f"persistent://public/default/cdlqx-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(
        topic, "work", consumer_type=kind, initial_position=pulsar.InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2))
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"poison")
    producer.send(b"after")
    counts: list[int] = []
    after_seen = 0
    while len(counts) < 6:
        msg = consumer.receive(10_000)
        if msg.data() == b"poison":
            counts.append(msg.redelivery_count())
            consumer.negative_acknowledge(msg)
        else:
            after_seen += 1
            consumer.acknowledge(msg)
    assert counts == [0, 1, 2, 2, 2, 2]
    assert after_seen >= 1
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}"
                                "/stats") as r:
        sub = json.load(r)["subscriptions"]["work"]
    # every send of the poison is one the application saw, or one hand-back per nack past the max
    poison_sends = sub["msgOutCounter"] - after_seen
    assert poison_sends <= 2 * len(counts), sub["msgOutCounter"]
    consumer.close()
