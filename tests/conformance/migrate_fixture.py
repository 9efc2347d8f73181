"""A letterbox tenant to migrate, shared by the migrate tests: a topic, a partitioned topic and a
batched topic, with subscriptions acknowledged out of order (batch-index acknowledgements on the
batched one), namespace policies Pulsar has too, a letterbox-only dead-letter policy and a
schema. `fill` returns what each subscription still owes; `drain_owed` checks on a broker that each
subscription's consumer receives exactly that, each message once, with its components kept."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import urllib.request
from typing import Any

import pulsar

from tests.conformance.targets import Target, client

Owed = dict[str, dict[str, set[str]]]  # topic -> subscription -> payloads not acknowledged


def admin_call(url: str, method: str, path: str, body: Any = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


# namespace policies Pulsar has too, as set on the source (and read back from the target)
POLICIES: dict[str, Any] = {
    "messageTTL": 3600,
    "backlogQuota": {"limitSize": 10_000_000, "limitTime": -1, "policy": "producer_request_hold"},
    "schemaCompatibilityStrategy": "FORWARD",
}


ORDERS_SCHEMA = {"type": "JSON", "properties": {"owner": "billing"}, "schema": json.dumps(
    {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})}
# its second version (an optional field: compatible both ways)
ORDERS_SCHEMA_V2 = {"type": "JSON", "properties": {"owner": "billing"}, "schema": json.dumps(
    {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"},
                                                   {"name": "note", "type": ["null", "string"], "default": None}]})}
# a namespace limit and the orders topic's own policy and grant, as set on the source
NAMESPACE_LIMITS: dict[str, Any] = {"maxProducersPerTopic": 9}
ORDERS_POLICIES: dict[str, Any] = {"maxConsumers": 7}


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def run_migrate(src: Target, dst: Target, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`letterbox migrate` from `src` to `dst` in a child process; TimeoutExpired when it hangs."""
    cmd = [sys.executable, "-m", "letterbox", "migrate", "--service-url", src.service_url, "--admin-url",
           src.admin_url, "--target-url", dst.service_url, "--target-admin-url", dst.admin_url, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def fill(lb: Target, tenant: str) -> Owed:
    """Topics with acked-out-of-order subscriptions on letterbox; what each subscription still owes."""
    admin_call(lb.admin_url, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    admin_call(lb.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/app")
    for path, body in POLICIES.items():
        admin_call(lb.admin_url, "PUT" if path.endswith("Strategy") else "POST", f"/admin/v2/namespaces/{tenant}/app/{path}",
               body)
    admin_call(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/letterbox/deadLetterPolicy",
           {"maxRedeliverCount": 3})
    plain, parted = f"persistent://{tenant}/app/orders", f"persistent://{tenant}/app/events"
    batched = f"persistent://{tenant}/app/batched"
    admin_call(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/permissions/reader", ["consume"])
    for path, body in NAMESPACE_LIMITS.items():
        admin_call(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/{path}", body)
    for schema in (ORDERS_SCHEMA, ORDERS_SCHEMA_V2):
        admin_call(lb.admin_url, "POST", f"/admin/v2/schemas/{tenant}/app/orders/schema", schema)
    admin_call(lb.admin_url, "PUT", f"/admin/v2/persistent/{tenant}/app/events/partitions", 3)
    rng = random.Random(7)
    owed: Owed = {}
    with client(lb) as c:
        for topic, n in ((plain, 120), (parted, 60)):
            subs = {s: c.subscribe(topic, s, consumer_type=pulsar.ConsumerType.Shared) for s in ("billing", "audit")}
            prod = c.create_producer(topic, batching_enabled=False)
            for i in range(n):
                prod.send(f"{topic.rsplit('/', 1)[1]}-{i}".encode(), partition_key=f"k{i % 7}",
                          ordering_key=f"o{i % 5}", properties={"i": str(i)}, event_timestamp=1_700_000_000_000 + i)
            owed[topic] = {}
            if topic == plain:
                for path, body in ORDERS_POLICIES.items():
                    admin_call(lb.admin_url, "POST", f"/admin/v2/persistent/{tenant}/app/orders/{path}", body)
                admin_call(lb.admin_url, "POST", f"/admin/v2/persistent/{tenant}/app/orders/permissions/auditor",
                           ["produce"])
            for name, cons in subs.items():
                keep = set()
                for _ in range(n):
                    m = cons.receive(10_000)
                    if rng.random() < (0.3 if name == "billing" else 0.7):
                        cons.acknowledge(m)
                    else:
                        keep.add(m.data().decode())
                cons.close()  # a clean close: its acknowledgements are durable
                owed[topic][name] = keep
        owed[batched] = {"partial": fill_batched(c, batched, rng)}
    return owed


def fill_batched(c: pulsar.Client, topic: str, rng: random.Random) -> set[str]:
    """40 messages in batch entries of 10; the subscription acknowledges some of each batch
    (batch-index acknowledgements): what it still owes."""
    cons = c.subscribe(topic, "partial", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    prod = c.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                             batching_max_publish_delay_ms=60_000)
    for i in range(40):
        prod.send_async(f"batched-{i}".encode(), None, partition_key=f"k{i % 7}", properties={"i": str(i)},
                        event_timestamp=1_700_000_000_000 + i)
        if i % 10 == 9:
            prod.flush()
    keep = set()
    for _ in range(40):
        m = cons.receive(10_000)
        assert m.message_id().batch_index() >= 0, "sent as batch entries"
        if rng.random() < 0.5:
            cons.acknowledge(m)
        else:
            keep.add(m.data().decode())
    cons.close()
    return keep


def drain_owed(target: Target, owed: Owed) -> None:
    """Each subscription's consumer on `target` receives exactly what it owes, each once, with the
    key, event time and source id of every message kept."""
    with client(target) as c:
        for topic, subs in owed.items():
            for name, keep in subs.items():
                cons = c.subscribe(topic, name, consumer_type=pulsar.ConsumerType.Shared)
                got: list[str] = []
                while True:
                    try:
                        m = cons.receive(3000)
                    except pulsar.Timeout:
                        break
                    got.append(m.data().decode())
                    i = m.properties()["i"]
                    assert m.partition_key() == f"k{int(i) % 7}"
                    assert m.event_timestamp() == 1_700_000_000_000 + int(i)
                    assert m.properties()["MIGRATED_MESSAGE_ID"]
                    cons.acknowledge(m)
                cons.close()
                assert len(got) == len(set(got)), (topic, name, "duplicates")
                assert sorted(got) == sorted(keep), (topic, name)
