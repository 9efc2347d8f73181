"""`letterbox migrate` onto the reference Apache Pulsar: a letterbox tenant with a topic and a
partitioned topic, subscriptions acknowledged out of order, is copied; on Pulsar each
subscription then receives exactly the messages it had not acknowledged, each once, with every
component kept; a second run sends nothing and changes nothing; mistakes get one-line errors."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pulsar
import pytest

from tests.conformance.targets import Target, client

pytestmark = pytest.mark.timeout(600)


def _admin(url: str, method: str, path: str, body: Any = None) -> None:
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


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def _migrate(src: Target, dst: Target, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "letterbox", "migrate", "--service-url", src.service_url, "--admin-url",
           src.admin_url, "--target-url", dst.service_url, "--target-admin-url", dst.admin_url, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _fill(lb: Target, tenant: str) -> dict[str, dict[str, set[str]]]:
    """Topics with acked-out-of-order subscriptions on letterbox; what each subscription still owes."""
    _admin(lb.admin_url, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    _admin(lb.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/app")
    for path, body in POLICIES.items():
        _admin(lb.admin_url, "PUT" if path.endswith("Strategy") else "POST", f"/admin/v2/namespaces/{tenant}/app/{path}",
               body)
    _admin(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/letterbox/deadLetterPolicy",
           {"maxRedeliverCount": 3})
    plain, parted = f"persistent://{tenant}/app/orders", f"persistent://{tenant}/app/events"
    batched = f"persistent://{tenant}/app/batched"
    _admin(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/permissions/reader", ["consume"])
    for path, body in NAMESPACE_LIMITS.items():
        _admin(lb.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/app/{path}", body)
    for schema in (ORDERS_SCHEMA, ORDERS_SCHEMA_V2):
        _admin(lb.admin_url, "POST", f"/admin/v2/schemas/{tenant}/app/orders/schema", schema)
    _admin(lb.admin_url, "PUT", f"/admin/v2/persistent/{tenant}/app/events/partitions", 3)
    rng = random.Random(7)
    owed: dict[str, dict[str, set[str]]] = {}
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
                    _admin(lb.admin_url, "POST", f"/admin/v2/persistent/{tenant}/app/orders/{path}", body)
                _admin(lb.admin_url, "POST", f"/admin/v2/persistent/{tenant}/app/orders/permissions/auditor",
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
        owed[batched] = {"partial": _fill_batched(c, batched, rng)}
    return owed


def _fill_batched(c: pulsar.Client, topic: str, rng: random.Random) -> set[str]:
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


def test_migrate_copies_messages_and_subscription_positions(reference: Target, letterbox_target: Target) -> None:
    tenant = f"mig{uuid.uuid4().hex[:8]}"
    owed = _fill(letterbox_target, tenant)
    plan = _migrate(letterbox_target, reference, "--tenant", tenant, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert f"partitioned topic persistent://{tenant}/app/events (3 partitions)" in plan.stdout
    first = _migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "verified: 5 topics, 9 subscriptions identical" in first.stdout
    assert f"note: {tenant}/app: deadLetterPolicy" in first.stderr and "letterbox-only" in first.stderr
    ns = f"{reference.admin_url}/admin/v2/namespaces/{tenant}/app"
    assert _get(f"{ns}/messageTTL") == POLICIES["messageTTL"]
    assert _get(f"{ns}/backlogQuotaMap")["destination_storage"]["limitSize"] == 10_000_000
    assert _get(f"{ns}/schemaCompatibilityStrategy") == "FORWARD"
    assert _get(f"{ns}/deduplication") is True
    assert _get(f"{ns}/permissions")["reader"] == ["consume"]
    for path, value in NAMESPACE_LIMITS.items():
        assert _get(f"{ns}/{path}") == value, path
    orders = f"{reference.admin_url}/admin/v2/persistent/{tenant}/app/orders"
    for path, value in ORDERS_POLICIES.items():
        assert _get(f"{orders}/{path}") == value, path
    assert _get(f"{orders}/permissions")["auditor"] == ["produce"]
    versions = _get(f"{reference.admin_url}/admin/v2/schemas/{tenant}/app/orders/schemas")["getSchemaResponses"]
    assert [(int(v["version"]), v["type"], json.loads(v["data"]), v["properties"]) for v in versions] == [
        (n, "JSON", json.loads(s["schema"]), {"owner": "billing"}) for n, s in enumerate((ORDERS_SCHEMA, ORDERS_SCHEMA_V2))]
    again = _migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("(0 sent by this run)") == 5, again.stderr
    with client(reference) as c:
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
                assert sorted(got) == sorted(keep), (topic, name)


def test_migrate_refuses_mistakes_before_writing(reference: Target, letterbox_target: Target) -> None:
    missing = _migrate(letterbox_target, reference, "--tenant", "no-such-tenant")
    assert missing.returncode == 2
    assert "the source has no tenant no-such-tenant" in missing.stderr
    assert "Traceback" not in missing.stderr
    down = Target("pulsar", "pulsar://127.0.0.1:9", "http://127.0.0.1:9")
    unreachable = _migrate(letterbox_target, down, "--tenant", "public")
    assert unreachable.returncode != 0
    assert "127.0.0.1:9" in unreachable.stderr and "Traceback" not in unreachable.stderr


def _stored(stats_url: str) -> int:
    """Messages the target topic took in so far (0 before it exists)."""
    try:
        with urllib.request.urlopen(stats_url, timeout=10) as r:
            return int(json.load(r)["msgInCounter"])
    except urllib.error.HTTPError:
        return 0


def test_migrate_killed_and_rerun_loses_and_duplicates_nothing(reference: Target, letterbox_target: Target) -> None:
    tenant = f"mig{uuid.uuid4().hex[:8]}"
    _admin(letterbox_target.admin_url, "PUT", f"/admin/v2/tenants/{tenant}",
           {"adminRoles": [], "allowedClusters": ["standalone"]})
    _admin(letterbox_target.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/bulk")
    # no subscription holds these messages: the namespace's retention keeps them
    _admin(letterbox_target.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/bulk/retention",
           {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
    topic = f"persistent://{tenant}/bulk/stream"
    n = 20_000
    with client(letterbox_target) as c:
        prod = c.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5,
                                 block_if_queue_full=True)
        failed: list[object] = []
        for i in range(n):
            prod.send_async(str(i).encode(), lambda res, _mid: failed.append(res) if res != pulsar.Result.Ok else None,
                            properties={"i": str(i)})
        prod.flush()
        assert not failed, failed[:3]
    cmd = [sys.executable, "-m", "letterbox", "migrate", "--service-url", letterbox_target.service_url,
           "--admin-url", letterbox_target.admin_url, "--target-url", reference.service_url,
           "--target-admin-url", reference.admin_url, "--tenant", tenant]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    rng = random.Random(11)
    stats = f"{reference.admin_url}/admin/v2/persistent/{tenant}/bulk/stream/stats"
    killed = []
    for _ in range(5):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stored = _stored(stats)
        while proc.poll() is None and _stored(stats) == stored:  # until this run's copy is under way
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.4))
        if proc.poll() is None:
            proc.kill()  # SIGKILL: no clean-up of any kind
            killed.append(_stored(stats))
        proc.wait()
    assert len(killed) >= 2 and killed[0] < n, f"too few runs were killed mid-copy: {killed}"
    final = _migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
    assert final.returncode == 0, final.stdout + final.stderr
    assert "verified: 1 topics, 0 subscriptions identical" in final.stdout
    with client(reference) as c:
        reader = c.create_reader(topic, pulsar.MessageId.earliest)
        seen = []
        while reader.has_message_available():
            seen.append(int(reader.read_next(10_000).data()))
        reader.close()
    if seen != list(range(n)):  # diagnosis: what the target's topic holds, by its stats
        with urllib.request.urlopen(stats, timeout=10) as r:
            held = json.load(r)["msgInCounter"]
        raise AssertionError(f"read {len(seen)} of {n} (target took in {held}); first gap at "
                             f"{next(i for i, v in enumerate(seen) if v != i)}; kills at {killed}")
