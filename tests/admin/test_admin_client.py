"""The official client through the HTTP service URL, partitioned-stats backlog, /metrics."""
from __future__ import annotations

import urllib.request

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"


def _metric(base: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_http_service_url_partitioned_backlog_and_metrics(broker: BrokerProcess) -> None:
    base = broker.admin_url
    assert call(base, "PUT", P + "/http-parts/partitions", "4")[0] == 204
    topic = "persistent://public/default/http-parts"
    client = pulsar.Client(base, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        consumer = client.subscribe(topic, "workers", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(40):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        status, stats = call(base, "GET", P + "/http-parts/partitioned-stats")
        assert status == 200 and stats["metadata"]["partitions"] == 4
        assert stats["msgInCounter"] == 40
        assert sum(1 for p in stats["partitions"].values() if p["msgInCounter"]) > 1  # spread out
        assert stats["subscriptions"]["workers"]["msgBacklog"] == 40
        assert stats["subscriptions"]["workers"]["type"] == "Shared"
        assert _metric(base, "pulsar_in_messages_total", topic=topic + "-partition-0") >= 0
        in_total = sum(
            _metric(base, "pulsar_in_messages_total", topic=f"{topic}-partition-{i}") for i in range(4)
        )
        assert in_total == 40
        received = set()
        for _ in range(40):
            msg = consumer.receive(10_000)
            received.add(msg.data())
            consumer.acknowledge(msg)
        assert len(received) == 40

        def backlog() -> int:
            s = call(base, "GET", P + "/http-parts/partitioned-stats")[1]
            return int(s["subscriptions"]["workers"]["msgBacklog"])

        assert wait_until(lambda: backlog() == 0, timeout=15), backlog()
        out_total = sum(
            _metric(base, "pulsar_out_messages_total", topic=f"{topic}-partition-{i}") for i in range(4)
        )
        assert out_total == 40
        assert sum(
            _metric(base, "pulsar_subscription_back_log", topic=f"{topic}-partition-{i}", subscription="workers")
            for i in range(4)
        ) == 0
        assert _metric(base, "pulsar_consumers_count", topic=topic + "-partition-0") == 1
        producer.close()
        consumer.close()
    finally:
        client.close()


def test_metrics_parse_and_counters_move(broker: BrokerProcess, client: pulsar.Client) -> None:
    base = broker.admin_url
    topic = "persistent://public/default/metric-moves"
    producer = client.create_producer(topic)
    producer.send(b"first")
    before = _metric(base, "pulsar_in_messages_total", topic=topic)
    for _ in range(5):
        producer.send(b"more")
    assert _metric(base, "pulsar_in_messages_total", topic=topic) == before + 5
    assert _metric(base, "pulsar_storage_size", topic=topic) > 0
    assert _metric(base, "pulsar_producers_count", topic=topic) == 1
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        names = {f.name for f in text_string_to_metric_families(resp.read().decode())}
    for family in ("pulsar_in_messages", "pulsar_out_messages", "pulsar_subscription_back_log",
                   "pulsar_subscription_msg_rate_redeliver", "pulsar_storage_size",
                   "pulsar_producers_count", "pulsar_consumers_count", "letterbox_dead_letter_messages"):
        assert family in names
    producer.close()


def test_dead_letter_counter_by_reason(broker: BrokerProcess, client: pulsar.Client) -> None:
    """Broker-side dead lettering (consumer property letterbox.dlq.max_redeliveries) is counted."""
    base = broker.admin_url
    topic = "persistent://public/default/metric-dlq"
    consumer = client.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100,
        properties={"letterbox.dlq.max_redeliveries": "1"},
    )
    producer = client.create_producer(topic)
    before = _metric(base, "letterbox_dead_letter_messages_total", reason="max-redeliveries")
    producer.send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(10_000))
    assert wait_until(
        lambda: _metric(base, "letterbox_dead_letter_messages_total", reason="max-redeliveries") == before + 1,
        timeout=15,
    )
    producer.close()
    consumer.close()
