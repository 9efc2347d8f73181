"""Pulsar's limits on unacked messages (per consumer, per subscription; Shared
and Key_Shared only, blocked until acks bring the count to half, shown in
stats) and on topics per namespace / subscriptions per topic."""
from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until


def topic() -> str:
    return f"persistent://public/default/limits-{uuid.uuid4().hex[:8]}"


def stats(broker: BrokerProcess, name: str) -> dict[str, Any]:
    url = f"{broker.admin_url}/admin/v2/persistent/{name.split('://')[1]}/stats"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def receive_until_silent(consumer: pulsar.Consumer, silence_ms: int = 1000) -> list[pulsar.Message]:
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_millis=silence_ms))
        except pulsar.Timeout:
            return got


def publish(client: pulsar.Client, name: str, n: int) -> None:
    producer = client.create_producer(name, batching_enabled=False)
    for i in range(n):
        producer.send(b"m-%d" % i)
    producer.close()


def test_consumer_blocked_at_max_unacked_until_half_is_acked(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_MAX_UNACKED_MESSAGES_PER_CONSUMER": "10"})
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    name = topic()
    try:
        consumer = client.subscribe(name, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=100)
        publish(client, name, 40)
        first = receive_until_silent(consumer)
        assert len(first) == 10
        c_stats = stats(broker, name)["subscriptions"]["s"]["consumers"][0]
        assert c_stats["blockedConsumerOnUnackedMsgs"] is True and c_stats["unackedMessages"] == 10
        for msg in first[:4]:
            consumer.acknowledge(msg)  # 6 unacked: still above half, still blocked
        assert receive_until_silent(consumer, 500) == []
        consumer.acknowledge(first[4])  # 5 unacked: half, dispatch resumes up to 10 again
        more = receive_until_silent(consumer)
        assert len(more) == 5
        seen = [m.data() for m in first + more]
        for msg in first[5:] + more:
            consumer.acknowledge(msg)
        while len(seen) < 40:
            batch = receive_until_silent(consumer)
            assert batch, f"stuck after {len(seen)} messages"
            seen += [m.data() for m in batch]
            for msg in batch:
                consumer.acknowledge(msg)
        assert sorted(seen) == sorted(b"m-%d" % i for i in range(40))
        assert wait_until(
            lambda: not stats(broker, name)["subscriptions"]["s"]["consumers"][0]["blockedConsumerOnUnackedMsgs"]
        )
    finally:
        client.close()


def test_subscription_blocked_at_max_unacked_across_its_consumers(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_MAX_UNACKED_MESSAGES_PER_SUBSCRIPTION": "10", "LETTERBOX_MAX_UNACKED_MESSAGES_PER_CONSUMER": "0",
    })
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    name = topic()
    try:
        consumers = [client.subscribe(name, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=100)
                     for _ in range(2)]
        publish(client, name, 30)
        held = [(c, m) for c in consumers for m in receive_until_silent(c)]
        assert len(held) == 10
        sub = stats(broker, name)["subscriptions"]["s"]
        assert sub["blockedSubscriptionOnUnackedMsgs"] is True and sub["unackedMessages"] == 10
        for c, m in held[:4]:
            c.acknowledge(m)  # 6 unacked: still blocked
        assert [m for c in consumers for m in receive_until_silent(c, 500)] == []
        for c, m in held[4:]:
            c.acknowledge(m)
        total = 10
        while total < 30:
            batch = [(c, m) for c in consumers for m in receive_until_silent(c, 500)]
            assert batch, f"stuck after {total} messages"
            total += len(batch)
            for c, m in batch:
                c.acknowledge(m)
        assert total == 30
    finally:
        client.close()


def test_exclusive_subscription_is_not_limited(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_MAX_UNACKED_MESSAGES_PER_CONSUMER": "10"})
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    name = topic()
    try:
        consumer = client.subscribe(name, "s", receiver_queue_size=100)
        publish(client, name, 30)
        assert len(receive_until_silent(consumer)) == 30
    finally:
        client.close()


def test_max_topics_per_namespace_and_max_subscriptions_per_topic(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_MAX_TOPICS_PER_NAMESPACE": "3", "LETTERBOX_MAX_SUBSCRIPTIONS_PER_TOPIC": "2",
    })
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    names = [topic() for _ in range(4)]
    try:
        for name in names[:3]:
            client.create_producer(name).send(b"x")
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer(names[3])
        status, body = call(broker.admin_url, "PUT", f"/admin/v2/persistent/{names[3].split('://')[1]}")
        assert status == 412 and "maxTopicsPerNamespace = 3" in body["reason"], body
        client.create_producer(names[0]).send(b"existing topics keep working")

        first = client.subscribe(names[0], "one")
        client.subscribe(names[0], "two").close()
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(names[0], "three")
        status, body = call(broker.admin_url, "PUT",
                            f"/admin/v2/persistent/{names[0].split('://')[1]}/subscription/three")
        assert status == 412 and "maxSubscriptionsPerTopic = 2" in body["reason"], body
        first.close()
        client.subscribe(names[0], "one").close()  # an existing subscription is always joinable
    finally:
        client.close()
