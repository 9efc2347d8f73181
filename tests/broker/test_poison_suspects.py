"""Poison-message early warning through the official client: the admin view, the CLI
and the /metrics gauge of messages above half their max redeliveries, and
letterbox_dead_letter_rate over the broker's (manual) clock."""
from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from tests.admin.helpers import call
from tests.broker.test_manual_clock import MANUAL, clock_now
from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess, wait_until


def scrape(b: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(b.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def gauge(b: BrokerProcess, topic: str, sub: str) -> float | None:
    labels = (("cluster", "standalone"), ("namespace", "public/default"), ("subscription", sub), ("topic", topic))
    return scrape(b).get(("letterbox_subscription_poison_suspects", labels))


def dead_letter_rate(b: BrokerProcess, reason: str) -> float | None:
    return scrape(b).get(("letterbox_dead_letter_rate", (("cluster", "standalone"), ("reason", reason))))


def suspects_of(b: BrokerProcess, topic: str, sub: str, query: str = "") -> tuple[int, Any]:
    return call(b.admin_url, "GET", f"/admin/v2/{topic.replace('://', '/')}/subscription/{sub}"
                                    f"/letterbox/poison-suspects{query}")


def fail_until(consumer: pulsar.Consumer, payload: bytes, count: int) -> pulsar.Message:
    """Nack `payload` until it comes back with redelivery count `count`; returns it unacked."""
    while True:
        msg = consumer.receive(10_000)
        assert msg.data() == payload
        if msg.redelivery_count() == count:
            return msg
        consumer.negative_acknowledge(msg)


def test_poison_suspects_view_cli_gauge_and_dead_letter_rate(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=MANUAL).start()
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/poison-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=20,
                                    properties={"letterbox.dlq.max_redeliveries": "4"})
        producer = client.create_producer(topic, batching_enabled=False)
        status, body = suspects_of(b, topic, "work")
        assert status == 200 and body["suspects"] == [] and body["maxRedeliveries"] == 4

        bad1 = producer.send(b"bad1")
        held1 = fail_until(consumer, b"bad1", 3)  # 3 redeliveries: more than half of 4
        producer.send(b"bad2")
        held2 = fail_until(consumer, b"bad2", 2)  # 2: exactly half, not above
        good = producer.send(b"good")
        msg = consumer.receive(10_000)
        assert msg.message_id() == good
        consumer.acknowledge(msg)

        status, body = suspects_of(b, topic, "work")
        assert status == 200, body
        assert body["suspectCount"] == 1 and body["truncated"] is False
        [suspect] = body["suspects"]
        assert suspect["messageId"] == f"{bad1.ledger_id()}:{bad1.entry_id()}:-1:-1"
        assert suspect["redeliveryCount"] == 3 and suspect["deliveryCount"] == 4
        assert suspect["maxRedeliveries"] == 4
        assert suspect["lastDeliveryTime"] == clock_now(b)  # on the broker's clock
        assert suspect["lastFailureReason"] is None  # the official client's nacks carry no reason
        assert wait_until(lambda: gauge(b, topic, "work") == 1)

        out = ok(admin(b, "topics", "poison-suspects", topic, "-s", "work"))
        assert "1 poison suspect(s), over half of max 4 redeliveries" in out
        assert suspect["messageId"] in out and "bad2" not in out
        as_json = ok_json(admin(b, "--output", "json", "topics", "poison-suspects", topic, "-s", "work"))
        assert as_json["suspects"] == body["suspects"]

        # bad1 fails twice more: the 5th redelivery is over the limit, it is dead-lettered
        consumer.negative_acknowledge(held1)
        consumer.negative_acknowledge(fail_until(consumer, b"bad1", 4))
        dlq = client.subscribe(topic + "-work-DLQ", "check", initial_position=pulsar.InitialPosition.Earliest)
        assert dlq.receive(10_000).data() == b"bad1"
        assert wait_until(lambda: suspects_of(b, topic, "work")[1]["suspectCount"] == 0)
        assert wait_until(lambda: gauge(b, topic, "work") == 0)
        # one dead letter in the last minute of the broker's clock
        assert wait_until(lambda: dead_letter_rate(b, "max-redeliveries") == 1 / 60)
        status, body = call(b.admin_url, "POST", "/admin/v2/letterbox/clock/advance?ms=61000")
        assert status == 200, body
        assert wait_until(lambda: dead_letter_rate(b, "max-redeliveries") == 0.0)

        # bad input
        status, body = suspects_of(b, topic, "nope")
        assert status == 404 and "nope" in body["reason"]
        status, body = suspects_of(b, topic, "work", "?limit=0")
        assert status == 412 and "limit" in body["reason"]
        status, body = suspects_of(b, "persistent://public/default/no-such-topic", "work")
        assert status == 404
        result = admin(b, "topics", "poison-suspects", topic, "-s", "nope")
        assert result.exit_code != 0 and "nope" in result.output + result.stderr
        consumer.acknowledge(held2)
        for c in (dlq, consumer):
            c.close()
        producer.close()
    finally:
        client.close()
        code = b.stop()
    assert code == 0, b.log()


def test_a_suspect_shows_the_last_failure_reason_given_through_letterbox_client(broker: BrokerProcess) -> None:
    from letterbox.client import DeadLetterPolicy, RetryConsumer

    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/poison-reason-{uuid.uuid4().hex[:8]}"
        consumer = RetryConsumer(client, topic, "work", enable_retry=False, admin_url=broker.admin_url,
                                 dead_letter_policy=DeadLetterPolicy(max_redeliver_count=4),
                                 negative_ack_redelivery_delay_ms=20)
        producer = client.create_producer(topic)
        producer.send(b"bad")
        reasons = ["db timeout", "db timeout", "schema mismatch: field 'amount'"]
        for n, reason in enumerate(reasons):
            msg = consumer.receive(10_000)
            assert msg.redelivery_count() == n
            consumer.negative_acknowledge(msg, reason=reason)
        held = consumer.receive(10_000)
        assert held.redelivery_count() == 3
        status, body = suspects_of(broker, topic, "work")
        assert status == 200, body
        [suspect] = body["suspects"]
        assert suspect["lastFailureReason"] == reasons[-1]
        assert suspect["deliveryCount"] == 4 and suspect["maxRedeliveries"] == 4
        out = ok(admin(broker, "topics", "poison-suspects", topic, "-s", "work"))
        assert reasons[-1] in out
        consumer.acknowledge(held)
        assert wait_until(lambda: suspects_of(broker, topic, "work")[1]["suspectCount"] == 0)
        consumer.close()
        producer.close()
    finally:
        client.close()


def test_a_partitioned_topic_answers_for_all_its_partitions(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/poison-parts-{uuid.uuid4().hex[:8]}"
    status, body = call(broker.admin_url, "PUT", "/admin/v2/" + topic.replace("://", "/") + "/partitions", "2")
    assert status == 204, body
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=20,
                                    properties={"letterbox.dlq.max_redeliveries": "2"})
        producer = client.create_producer(topic, batching_enabled=False)
        sent = producer.send(b"bad", partition_key="k")
        held = fail_until(consumer, b"bad", 2)  # 2 redeliveries: above half of 2
        status, body = suspects_of(broker, topic, "work")
        assert status == 200 and body["suspectCount"] == 1, body
        assert body["suspects"][0]["messageId"] == f"{sent.ledger_id()}:{sent.entry_id()}:{sent.partition()}:-1"
        assert body["maxRedeliveries"] == 2
        status, body = suspects_of(broker, topic, "other")
        assert status == 404
        consumer.acknowledge(held)
        consumer.close()
        producer.close()
    finally:
        client.close()
