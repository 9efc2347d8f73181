"""Namespace policies: dedup, retention, message TTL and letterbox's dead-letter and backoff policies —
validation, persistence across a restart, and their effect on the broker."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

N = "/admin/v2/namespaces/public/"


@pytest.fixture
def ns(broker: BrokerProcess, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test, named after it."""
    name = request.node.name.replace("_", "-")[:40]
    assert call(broker.admin_url, "PUT", N + name)[0] == 204
    return name


def test_policy_crud_and_validation(broker: BrokerProcess, ns: str) -> None:
    b, base = broker.admin_url, N + ns
    assert call(b, "GET", base + "/deduplication") == (204, "")
    assert call(b, "POST", base + "/deduplication", "true")[0] == 204
    assert call(b, "GET", base + "/deduplication") == (200, True)
    assert call(b, "POST", base + "/deduplication", '"yes"')[0] == 400
    assert call(b, "POST", base + "/deduplication", "{nope")[0] == 400
    assert call(b, "POST", base + "/deduplication")[0] == 400
    assert call(b, "DELETE", base + "/deduplication")[0] == 204
    assert call(b, "GET", base + "/deduplication") == (204, "")

    assert call(b, "GET", base + "/retention") == (200, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    assert call(b, "POST", base + "/retention", '{"retentionTimeInMinutes": -2}')[0] == 412
    assert call(b, "POST", base + "/retention", '{"retentionTimeInMinutes": "x"}')[0] == 400
    assert call(b, "POST", base + "/retention", '{"retentionMinutes": 5}')[0] == 400
    assert call(b, "POST", base + "/retention", '{"retentionTimeInMinutes": 10, "retentionSizeInMB": 5}')[0] == 204
    assert call(b, "GET", base + "/retention") == (200, {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5})

    assert call(b, "POST", base + "/messageTTL", "-1")[0] == 412
    assert call(b, "POST", base + "/messageTTL", '"60"')[0] == 400
    assert call(b, "POST", base + "/messageTTL", "60")[0] == 204
    assert call(b, "GET", base + "/messageTTL") == (200, 60)

    dl = base + "/letterbox/deadLetterPolicy"
    assert call(b, "GET", dl) == (204, "")
    assert call(b, "POST", dl, '{"maxRedeliverCount": 0}')[0] == 412
    assert call(b, "POST", dl, "{}")[0] == 400
    assert call(b, "POST", dl, '{"maxRedeliverCount": 3, "deadLetterTopic": "non-persistent://public/x/y"}')[0] == 412
    assert call(b, "POST", dl, '{"maxRedeliverCount": 3, "deadLetterTopic": 5}')[0] == 400
    assert call(b, "POST", dl, '{"maxRedeliverCount": 3}')[0] == 204
    assert call(b, "GET", dl) == (200, {"maxRedeliverCount": 3, "deadLetterTopic": None,
                                        "initialSubscriptionName": None})

    bo = base + "/letterbox/redeliveryBackoff"
    assert call(b, "POST", bo, '{"minDelayMs": 10, "maxDelayMs": 5}')[0] == 412
    assert call(b, "POST", bo, '{"minDelayMs": 10, "multiplier": 0.5}')[0] == 412
    assert call(b, "POST", bo, '{"minDelayMs": -10}')[0] == 412
    assert call(b, "POST", bo, '{"minDelayMs": 100}')[0] == 204
    assert call(b, "GET", bo) == (200, {"minDelayMs": 100, "maxDelayMs": 60000, "multiplier": 2.0})

    status, policies = call(b, "GET", base)
    assert status == 200 and "deduplicationEnabled" not in policies  # removed by the DELETE above
    assert policies["message_ttl_in_seconds"] == 60
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5}
    for path in ("/deduplication", "/retention", "/messageTTL", "/letterbox/deadLetterPolicy"):
        assert call(b, "GET", N + "ghost-ns" + path)[0] == 404
        assert call(b, "POST", N + "ghost-ns" + path, "1")[0] in (400, 404)
    assert call(b, "PUT", base + "/messageTTL", "5")[0] == 405


def test_policies_survive_restart(broker_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "d"
    b = broker_factory(data)
    assert call(b.admin_url, "PUT", N + "kept")[0] == 204
    assert call(b.admin_url, "POST", N + "kept/messageTTL", "120")[0] == 204
    assert call(b.admin_url, "POST", N + "kept/deduplication", "true")[0] == 204
    assert call(b.admin_url, "POST", N + "kept/letterbox/deadLetterPolicy", '{"maxRedeliverCount": 2}')[0] == 204
    b.kill()
    b2 = broker_factory(data)
    assert call(b2.admin_url, "GET", N + "kept/messageTTL") == (200, 120)
    assert call(b2.admin_url, "GET", N + "kept/deduplication") == (200, True)
    assert call(b2.admin_url, "GET", N + "kept/letterbox/deadLetterPolicy")[1]["maxRedeliverCount"] == 2


def _entries(base: str, topic: str) -> int:
    status, stats = call(base, "GET", f"/admin/v2/persistent/{topic}/internalStats")
    assert status == 200, stats
    return int(stats["numberOfEntries"])


def test_deduplication_per_namespace(broker: BrokerProcess, client: Any, ns: str) -> None:
    assert call(broker.admin_url, "POST", N + ns + "/deduplication", "true")[0] == 204
    for namespace, expected in ((ns, 1), ("default", 2)):
        topic = f"public/{namespace}/dedup-{ns}"
        producer = client.create_producer("persistent://" + topic, batching_enabled=False)
        producer.send(b"once", sequence_id=5)
        producer.send(b"twice", sequence_id=5)
        producer.close()
        assert _entries(broker.admin_url, topic) == expected
        stats = call(broker.admin_url, "GET", f"/admin/v2/persistent/{topic}/stats")[1]
        assert stats["deduplicationStatus"] == ("Enabled" if expected == 1 else "Disabled")


def test_retention_keeps_acknowledged_messages(broker: BrokerProcess, client: Any, ns: str) -> None:
    body = '{"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}'
    assert call(broker.admin_url, "POST", N + ns + "/retention", body)[0] == 204
    topics = [f"public/{ns}/kept", f"public/default/not-kept-{ns}"]
    for topic in topics:
        consumer = client.subscribe("persistent://" + topic, "s")
        producer = client.create_producer("persistent://" + topic, batching_enabled=False)
        for _ in range(3):
            producer.send(b"x")
        for _ in range(3):
            consumer.acknowledge(consumer.receive(timeout_millis=5000))
        consumer.close()
        producer.close()
    assert wait_until(lambda: _entries(broker.admin_url, topics[1]) == 0, 20)
    assert _entries(broker.admin_url, topics[0]) == 3


def test_retention_size_limit(broker: BrokerProcess, client: Any, ns: str) -> None:
    body = '{"retentionTimeInMinutes": -1, "retentionSizeInMB": 1}'
    assert call(broker.admin_url, "POST", N + ns + "/retention", body)[0] == 204
    topic = f"public/{ns}/sized"
    consumer = client.subscribe("persistent://" + topic, "s")
    producer = client.create_producer("persistent://" + topic, batching_enabled=False)
    for i in range(30):  # about 3 MB
        producer.send(bytes([i]) * 100_000)
    for _ in range(20):  # 2 MB acknowledged, 1 MB of backlog
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    # acknowledged entries go, oldest first, until the topic holds 1 MB; the backlog stays
    assert wait_until(lambda: _entries(broker.admin_url, topic) == 10, 20), _entries(broker.admin_url, topic)
    for i in range(20, 30):
        assert consumer.receive(timeout_millis=5000).data()[0] == i
    consumer.close()
    producer.close()


def test_ttl_expires_and_dead_letters(broker: BrokerProcess, client: Any, ns: str) -> None:
    b = broker.admin_url
    assert call(b, "POST", N + ns + "/messageTTL", "1")[0] == 204
    plain, dl = f"public/{ns}/ttl-plain", f"public/{ns}/ttl-dl"
    for topic in (plain, dl):
        assert call(b, "PUT", f"/admin/v2/persistent/{topic}")[0] == 204
        assert call(b, "PUT", f"/admin/v2/persistent/{topic}/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    # a consumer's properties give ttl-dl's subscription a dead-letter policy
    c = client.subscribe("persistent://" + dl, "s", properties={"letterbox.dlq.max_redeliveries": "5"})
    c.close()
    for topic in (plain, dl):
        producer = client.create_producer("persistent://" + topic, batching_enabled=False)
        for i in range(4):
            producer.send(f"t{i}".encode())
        producer.close()

    def backlog(topic: str) -> int:
        return int(call(b, "GET", f"/admin/v2/persistent/{topic}/stats")[1]["subscriptions"]["s"]["msgBacklog"])

    def dead_lettered() -> int:
        listed = call(b, "GET", N + ns + "/letterbox/deadLetterTopics")[1]
        return sum(t["messages"] for t in listed) if isinstance(listed, list) else 0

    # the subscription's ack is in memory before the DLQ append commits: wait for both
    assert wait_until(lambda: backlog(plain) == 0 and backlog(dl) == 0 and dead_lettered() >= 4, 15)
    status, topics = call(b, "GET", N + ns + "/letterbox/deadLetterTopics")
    assert status == 200
    assert [(t["topic"], t["byReason"]) for t in topics] == [(f"persistent://{dl}-s-DLQ", {"expired": 4})]


def test_namespace_dead_letter_policy_and_consumer_precedence(broker: BrokerProcess, ns: str) -> None:
    b = broker.admin_url
    policy = f'{{"maxRedeliverCount": 1, "deadLetterTopic": "persistent://public/{ns}/ns-dlq"}}'
    assert call(b, "POST", N + ns + "/letterbox/deadLetterPolicy", policy)[0] == 204
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    try:
        for sub, props, dlq in (
            ("plain", {}, "ns-dlq"),
            ("own", {"letterbox.dlq.max_redeliveries": "1", "letterbox.dlq.topic": f"persistent://public/{ns}/own-dlq"},
             "own-dlq"),
        ):
            topic = f"persistent://public/{ns}/poison-{sub}"
            consumer = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                        negative_ack_redelivery_delay_ms=20, properties=props)
            client.create_producer(topic).send(b"poison")

            def nack(consumer: Any = consumer, dlq: str = dlq) -> bool:
                with contextlib.suppress(pulsar.Timeout):
                    consumer.negative_acknowledge(consumer.receive(timeout_millis=100))
                st, msgs = call(b, "GET", f"/admin/v2/persistent/public/{ns}/{dlq}/letterbox/deadLetters")
                return st == 200 and len(msgs) == 1

            assert wait_until(nack, 20, 0)
            consumer.close()
    finally:
        client.close()


def test_namespace_backoff_policy_delays_redelivery(broker: BrokerProcess, client: Any, ns: str) -> None:
    body = '{"minDelayMs": 800, "maxDelayMs": 800}'
    assert call(broker.admin_url, "POST", N + ns + "/letterbox/redeliveryBackoff", body)[0] == 204
    topic = f"persistent://public/{ns}/slow"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=10)
    client.create_producer(topic).send(b"again")
    first = consumer.receive(timeout_millis=5000)
    nacked_at = time.monotonic()
    consumer.negative_acknowledge(first)
    second = consumer.receive(timeout_millis=10000)
    assert second.data() == b"again" and second.redelivery_count() == 1
    assert time.monotonic() - nacked_at >= 0.7  # never earlier than the namespace's backoff
    consumer.acknowledge(second)
    consumer.close()
