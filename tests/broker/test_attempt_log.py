"""The delivery attempt log with the official client alone (no letterbox.client): each
nack and each consumer gone is one attempt, with the consumer's name and address; the
dead letter carries the log as DELIVERY_ATTEMPTS; plain-client redeliveries are nacks."""
from __future__ import annotations

import json
import uuid

import pulsar

from tests.broker.test_broker_dlq import read_topic
from tests.conftest import BrokerProcess


def test_plain_client_nacks_are_logged_and_copied_into_the_dead_letter(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/attempts-plain-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                consumer_name="plain-worker",
                                properties={"letterbox.dlq.max_redeliveries": "2"},
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"poison")
    for _ in range(3):
        msg = consumer.receive(10_000)
        consumer.negative_acknowledge(msg)
    dead = read_topic(client, f"{topic}-work-DLQ")
    assert len(dead) == 1
    props = dead[0].properties()
    attempts = json.loads(props["DELIVERY_ATTEMPTS"])
    assert [a["ending"] for a in attempts] == ["nack", "nack", "nack"]
    assert {a["consumer"] for a in attempts} == {"plain-worker"}
    assert all(a["address"].startswith("127.0.0.1:") for a in attempts)
    assert all(a["reason"] is None for a in attempts)
    assert all(a["deliveredAt"] <= a["endedAt"] for a in attempts)
    assert [a["endedAt"] for a in attempts] == sorted(a["endedAt"] for a in attempts)
    assert "FAILURE_DESCRIPTION" not in props  # no client said why
    consumer.close()
    producer.close()


def test_consumer_gone_is_an_attempt(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/attempts-gone-{uuid.uuid4().hex[:6]}"
    props = {"letterbox.dlq.max_redeliveries": "1"}
    producer = client.create_producer(topic, batching_enabled=False)
    for name in ("first", "second"):
        c = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared, consumer_name=name,
                             properties=props, initial_position=pulsar.InitialPosition.Earliest)
        if name == "first":
            producer.send(b"crasher")
        c.receive(10_000)
        c.close()  # holding the message: its delivery ended with the consumer
    dead = read_topic(client, f"{topic}-work-DLQ")
    assert len(dead) == 1
    attempts = json.loads(dead[0].properties()["DELIVERY_ATTEMPTS"])
    assert [(a["consumer"], a["ending"]) for a in attempts] == [("first", "consumer-gone"),
                                                               ("second", "consumer-gone")]
    producer.close()


def test_expiry_ends_the_log_with_an_expired_attempt(broker: BrokerProcess, client: pulsar.Client) -> None:
    import urllib.request

    topic = f"persistent://public/default/attempts-expire-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared, consumer_name="slow",
                                properties={"letterbox.dlq.max_redeliveries": "5"},
                                negative_ack_redelivery_delay_ms=20)
    client.create_producer(topic, batching_enabled=False).send(b"stale")
    consumer.negative_acknowledge(consumer.receive(10_000))
    consumer.receive(10_000)  # held by "slow" when it expires
    path = topic.removeprefix("persistent://")
    req = urllib.request.Request(f"{broker.admin_url}/admin/v2/persistent/{path}/subscription/work/expireMessages/0",
                                 method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    dead = read_topic(client, f"{topic}-work-DLQ")
    assert len(dead) == 1 and dead[0].properties()["DEAD_LETTER_REASON"] == "expired"
    attempts = json.loads(dead[0].properties()["DELIVERY_ATTEMPTS"])
    assert [(a["ending"], a["consumer"]) for a in attempts] == [("nack", "slow"), ("expired", "slow")]
    consumer.close()


def test_partitioned_topic_is_read_from_the_partition_the_id_names(broker: BrokerProcess,
                                                                    client: pulsar.Client) -> None:
    import urllib.request

    from letterbox.client import message_id_text

    name = f"attempts-part-{uuid.uuid4().hex[:6]}"
    base = f"{broker.admin_url}/admin/v2/persistent/public/default/{name}"
    req = urllib.request.Request(base + "/partitions", data=b"2", method="PUT",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared, consumer_name="p-worker",
                                negative_ack_redelivery_delay_ms=20)
    client.create_producer(topic, batching_enabled=False).send(b"x", partition_key="k")
    msg = consumer.receive(10_000)
    mid = message_id_text(msg)
    assert int(mid.split(":")[2]) >= 0
    consumer.negative_acknowledge(msg)
    consumer.receive(10_000)
    with urllib.request.urlopen(f"{base}/subscription/work/letterbox/attempts/{mid}", timeout=10) as resp:
        log = json.loads(resp.read())
    assert log["topic"] == f"{topic}-partition-{mid.split(':')[2]}"
    assert [(a["ending"], a["consumer"]) for a in log["attempts"]] == [("nack", "p-worker")]
    consumer.close()
