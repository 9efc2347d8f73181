"""/metrics after the off-the-loop rewrite: the same families and labels, values
that follow the broker, concurrent scrapes answered alike."""
from __future__ import annotations

import concurrent.futures
import urllib.request

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from letterbox.admin.metrics import FAMILY_NAMES
from tests.conftest import BrokerProcess


def _scrape(base: str) -> str:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        return resp.read().decode()


def test_metrics_families_labels_and_values(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = "persistent://public/default/metrics-families"
    consumer = client.subscribe(topic, "fam-sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(7):
        producer.send(f"m{i}".encode())
    text = _scrape(broker.admin_url)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {n.removesuffix("_total") for n in FAMILY_NAMES}
    assert expected <= set(families), expected - set(families)
    assert len(FAMILY_NAMES) == 16
    samples = {(s.name, s.labels.get("subscription")): s for f in families.values() for s in f.samples
               if s.labels.get("topic") == topic}
    base_labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert samples[("pulsar_in_messages_total", None)].value == 7
    assert samples[("pulsar_in_messages_total", None)].labels == base_labels
    assert samples[("pulsar_producers_count", None)].value == 1
    assert samples[("pulsar_subscriptions_count", None)].value == 1
    assert samples[("pulsar_consumers_count", None)].value == 1
    assert samples[("pulsar_subscription_consumers_count", "fam-sub")].labels == {
        **base_labels, "subscription": "fam-sub"}
    assert samples[("pulsar_subscription_back_log", "fam-sub")].value == 7
    # scrapes at the same time share a build and all get a complete body
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        bodies = list(pool.map(lambda _: _scrape(broker.admin_url), range(8)))
    for body in bodies:
        names = {f.name for f in text_string_to_metric_families(body)}
        assert expected <= names
    producer.close()
    consumer.close()
