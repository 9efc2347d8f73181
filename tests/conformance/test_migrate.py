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

import pulsar
import pytest

from tests.conformance.migrate_fixture import (
    NAMESPACE_LIMITS,
    ORDERS_POLICIES,
    ORDERS_SCHEMA,
    ORDERS_SCHEMA_V2,
    POLICIES,
    admin_call,
    drain_owed,
    fill,
    get_json,
    run_migrate,
)
from tests.conformance.targets import Target, client

pytestmark = pytest.mark.timeout(600)


def test_migrate_copies_messages_and_subscription_positions(reference: Target, letterbox_target: Target) -> None:
    tenant = f"mig{uuid.uuid4().hex[:8]}"
    owed = fill(letterbox_target, tenant)
    plan = run_migrate(letterbox_target, reference, "--tenant", tenant, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert f"partitioned topic persistent://{tenant}/app/events (3 partitions)" in plan.stdout
    first = run_migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "verified: 5 topics, 9 subscriptions identical" in first.stdout
    assert f"note: {tenant}/app: deadLetterPolicy" in first.stderr and "letterbox-only" in first.stderr
    ns = f"{reference.admin_url}/admin/v2/namespaces/{tenant}/app"
    assert get_json(f"{ns}/messageTTL") == POLICIES["messageTTL"]
    assert get_json(f"{ns}/backlogQuotaMap")["destination_storage"]["limitSize"] == 10_000_000
    assert get_json(f"{ns}/schemaCompatibilityStrategy") == "FORWARD"
    assert get_json(f"{ns}/deduplication") is True
    assert get_json(f"{ns}/permissions")["reader"] == ["consume"]
    for path, value in NAMESPACE_LIMITS.items():
        assert get_json(f"{ns}/{path}") == value, path
    orders = f"{reference.admin_url}/admin/v2/persistent/{tenant}/app/orders"
    for path, value in ORDERS_POLICIES.items():
        assert get_json(f"{orders}/{path}") == value, path
    assert get_json(f"{orders}/permissions")["auditor"] == ["produce"]
    versions = get_json(f"{reference.admin_url}/admin/v2/schemas/{tenant}/app/orders/schemas")["getSchemaResponses"]
    assert [(int(v["version"]), v["type"], json.loads(v["data"]), v["properties"]) for v in versions] == [
        (n, "JSON", json.loads(s["schema"]), {"owner": "billing"}) for n, s in enumerate((ORDERS_SCHEMA, ORDERS_SCHEMA_V2))]
    again = run_migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("(0 sent by this run)") == 5, again.stderr
    drain_owed(reference, owed)


def test_migrate_refuses_mistakes_before_writing(reference: Target, letterbox_target: Target) -> None:
    missing = run_migrate(letterbox_target, reference, "--tenant", "no-such-tenant")
    assert missing.returncode == 2
    assert "the source has no tenant no-such-tenant" in missing.stderr
    assert "Traceback" not in missing.stderr
    down = Target("pulsar", "pulsar://127.0.0.1:9", "http://127.0.0.1:9")
    unreachable = run_migrate(letterbox_target, down, "--tenant", "public")
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
    admin_call(letterbox_target.admin_url, "PUT", f"/admin/v2/tenants/{tenant}",
           {"adminRoles": [], "allowedClusters": ["standalone"]})
    admin_call(letterbox_target.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/bulk")
    # no subscription holds these messages: the namespace's retention keeps them
    admin_call(letterbox_target.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/bulk/retention",
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
    final = run_migrate(letterbox_target, reference, "--tenant", tenant, "--verify")
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
