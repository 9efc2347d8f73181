"""`letterbox migrate --data-dir` onto the reference Apache Pulsar: a letterbox broker fills a data
directory (two topics, subscriptions acknowledged out of order), is stopped, and the directory is
migrated; on Pulsar each subscription then receives exactly the messages it had not acknowledged.
The private broker that served the directory is gone afterwards (its lock is free), and a
directory a running broker holds, or one that is no data directory, is refused in one line."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from pathlib import Path

import pulsar
import pytest

from letterbox.storage.data_dir_lock import DataDirLock
from tests.conformance.targets import Target, admin, client, receive_all
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(600)


def _migrate(data_dir: Path, dst: Target, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "letterbox", "migrate", "--data-dir", str(data_dir), "--target-url",
           dst.service_url, "--target-admin-url", dst.admin_url, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _fill(b: BrokerProcess, tenant: str) -> dict[str, dict[str, set[str]]]:
    lb = Target("letterbox", b.url, b.admin_url)
    admin(lb, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    admin(lb, "PUT", f"/admin/v2/namespaces/{tenant}/app")
    rng = random.Random(5)
    owed: dict[str, dict[str, set[str]]] = {}
    with client(lb) as c:
        for name, n in (("orders", 60), ("events", 30)):
            topic = f"persistent://{tenant}/app/{name}"
            subs = {s: c.subscribe(topic, s, consumer_type=pulsar.ConsumerType.Shared) for s in ("billing", "audit")}
            prod = c.create_producer(topic, batching_enabled=False)
            for i in range(n):
                prod.send(f"{name}-{i}".encode(), properties={"i": str(i)})
            owed[topic] = {}
            for sub, cons in subs.items():
                keep = set()
                for _ in range(n):
                    m = cons.receive(10_000)
                    if rng.random() < (0.4 if sub == "billing" else 0.8):
                        cons.acknowledge(m)
                    else:
                        keep.add(m.data().decode())
                cons.close()
                owed[topic][sub] = keep
    return owed


def test_migrate_a_stopped_brokers_data_dir(reference: Target, tmp_path: Path) -> None:
    tenant = f"dir{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "data").start()
    owed = _fill(broker, tenant)
    running = _migrate(broker.data_dir, reference, "--tenant", tenant)
    assert running.returncode == 2 and "is in use by pid" in running.stderr, running.stderr
    assert "Traceback" not in running.stderr and len(running.stderr.strip().splitlines()) == 1
    broker.stop()

    done = _migrate(broker.data_dir, reference, "--tenant", tenant, "--verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: 2 topics, 4 subscriptions identical" in done.stdout
    lock = DataDirLock(broker.data_dir)
    lock.acquire("test")  # the private broker is gone
    lock.release()
    with client(reference) as c:
        for topic, subs in owed.items():
            for sub, keep in subs.items():
                cons = c.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared)
                got = [m.data().decode() for m in receive_all(cons)]
                cons.close()
                assert sorted(got) == sorted(keep), (topic, sub)


def test_migrate_refuses_a_directory_that_is_no_data_dir(reference: Target, tmp_path: Path) -> None:
    r = _migrate(tmp_path, reference)
    assert r.returncode == 2 and "holds no letterbox.db" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
