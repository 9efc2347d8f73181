"""Issue 15 item 7: /metrics carries Pulsar's metric names with Pulsar's labels and types, parsed
by prometheus_client's own parser, with values that follow a produce / consume / retry /
dead-letter run through the official client; broker-side appends count in the target topic's
in-counters and dead letters are labelled with their source topic and subscription."""
from __future__ import annotations

import time
import urllib.request
import uuid
from datetime import timedelta
from typing import Any

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from letterbox.admin.metrics import PROCESS_FAMILY_NAMES, PULSAR_FAMILY_NAMES
from letterbox.client import DeadLetterPolicy, RetryConsumer
from tests.conftest import BrokerProcess

TOPIC_LABELS = {"cluster", "namespace", "topic"}
SUB_LABELS = TOPIC_LABELS | {"subscription"}
TYPES = {
    "pulsar_throughput_in": "gauge", "pulsar_throughput_out": "gauge", "pulsar_out_bytes": "counter",
    "pulsar_storage_backlog_size": "gauge", "pulsar_storage_write_rate": "gauge",
    "pulsar_subscription_msg_rate_out": "gauge", "pulsar_subscription_msg_throughput_out": "gauge",
    "pulsar_subscription_back_log_no_delayed": "gauge", "pulsar_subscription_blocked_on_unacked_messages": "gauge",
    "pulsar_subscription_msg_rate_expired": "gauge", "pulsar_topics_count": "gauge",
    "pulsar_active_connections": "gauge", "process_cpu_seconds": "counter",
    "process_resident_memory_bytes": "gauge", "process_open_fds": "gauge", "process_start_time_seconds": "gauge",
}


def _families(admin_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(families: dict[str, Any], family: str, **labels: str) -> float:
    found = [s.value for s in families[family].samples
             if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (family, labels, found)
    return float(found[0])


def test_pulsar_names_labels_and_values(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/pnames-{uuid.uuid4().hex[:8]}"
    retry, dlq = f"{topic}-s-RETRY", f"{topic}-s-DLQ"
    consumer = RetryConsumer(client, topic, "s", admin_url=broker.admin_url,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3))
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"message-{i}".encode())
    got = [consumer.receive(10_000) for _ in range(5)]
    for msg in got[:3]:
        consumer.acknowledge(msg)
    consumer.reconsume_later(got[3], timedelta(minutes=10))  # broker-side append to the retry topic
    consumer.terminate(got[4], "bad")  # broker-side append to the dead letter topic

    sent = 5
    deadline = time.monotonic() + 30
    while True:  # rates come from the broker's once-a-second samples: keep the counters moving
        producer.send(b"more")
        consumer.acknowledge(consumer.receive(10_000))
        sent += 1
        time.sleep(0.3)
        fams = _families(broker.admin_url)
        ready = (_value(fams, "pulsar_throughput_in", topic=topic) > 0
                 and _value(fams, "pulsar_subscription_msg_rate_out", topic=topic, subscription="s") > 0
                 and _value(fams, "pulsar_storage_write_rate", topic=topic) > 0)
        if ready or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ready, "rates stayed 0 for 30 s"

    for name in (*PULSAR_FAMILY_NAMES, *PROCESS_FAMILY_NAMES):
        family = name.removesuffix("_total")
        assert family in fams, name
        if family in TYPES:
            assert fams[family].type == TYPES[family], (family, fams[family].type)
    for name in PULSAR_FAMILY_NAMES:
        family = name.removesuffix("_total")
        for sample in fams[family].samples:
            keys = set(sample.labels)
            if name.startswith("pulsar_subscription_"):
                assert keys == SUB_LABELS, (name, keys)
            elif name == "pulsar_topics_count":
                assert keys == {"cluster", "namespace"}, keys
            elif name == "pulsar_active_connections":
                assert keys == {"cluster", "broker", "metric"} and sample.labels["metric"] == "broker_connection"
            else:
                assert keys == TOPIC_LABELS, (name, keys)

    # values follow the run
    assert _value(fams, "pulsar_in_messages", topic=topic) == sent
    assert _value(fams, "pulsar_in_messages", topic=retry) == 1  # counted though no producer sent it
    assert _value(fams, "pulsar_in_messages", topic=dlq) == 1
    assert _value(fams, "pulsar_in_bytes", topic=dlq) > len(b"message-4")
    assert _value(fams, "pulsar_out_bytes", topic=topic) >= sent * len(b"more")
    assert _value(fams, "pulsar_throughput_out", topic=topic) > 0
    assert _value(fams, "pulsar_storage_backlog_size", topic=topic) == 0  # all settled
    assert _value(fams, "pulsar_subscription_back_log", topic=retry, subscription="s") == 1
    assert _value(fams, "pulsar_subscription_back_log_no_delayed", topic=retry, subscription="s") == 0
    assert _value(fams, "pulsar_subscription_blocked_on_unacked_messages", topic=topic, subscription="s") == 0
    assert _value(fams, "pulsar_subscription_msg_rate_expired", topic=topic, subscription="s") == 0
    assert _value(fams, "pulsar_subscription_msg_throughput_out", topic=topic, subscription="s") > 0
    assert _value(fams, "pulsar_topics_count", namespace="public/default") >= 3
    assert _value(fams, "pulsar_active_connections") >= 1
    assert _value(fams, "process_resident_memory_bytes") > 0 and _value(fams, "process_open_fds") > 0
    assert _value(fams, "letterbox_dead_letter_messages", topic=topic, subscription="s", reason="terminated",
                  namespace="public/default") == 1
    producer.close()
    consumer.close()
