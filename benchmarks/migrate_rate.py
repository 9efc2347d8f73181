"""`letterbox migrate` onto Apache Pulsar: its rate and its memory, one command:

    .venv/bin/python benchmarks/migrate_rate.py [--messages 100000] [--topics 10]

Starts letterbox (`--sync full`) and the reference Apache Pulsar standalone (conformance/reference.py;
or uses one already running: LETTERBOX_REFERENCE_URLS="pulsar://... http://..."), fills a tenant
on letterbox -- --topics topics, two of them partitioned (3 partitions), --messages messages in
all, 100 B each, three subscriptions per topic acknowledging about 30 %, 50 % and 70 % of the
messages out of order, and a dead letter topic filled by letterbox's broker-side policy -- then
times `letterbox migrate --tenant T` (a child process: wall time, peak RSS from getrusage) and
its `--verify`, and prints one table row. The machine's load is printed beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pulsar
from _broker import Broker
from _systems import Pulsar

SUBSCRIPTIONS = {"billing": 0.3, "audit": 0.5, "search": 0.7}
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def _admin(url: str, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=60).close()


def fill(url: str, admin: str, tenant: str, topics: int, messages: int) -> None:
    _admin(admin, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    _admin(admin, "PUT", f"/admin/v2/namespaces/{tenant}/app")
    rng = random.Random(5)
    per = messages // topics
    client = pulsar.Client(url, operation_timeout_seconds=60, logger=LOGGER)
    try:
        for t in range(topics):
            topic = f"persistent://{tenant}/app/t{t}"
            if t < 2:
                _admin(admin, "PUT", f"/admin/v2/persistent/{tenant}/app/t{t}/partitions", 3)
            subs = {s: client.subscribe(topic, s, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=2000)
                    for s in SUBSCRIPTIONS}
            producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True,
                                              max_pending_messages=2000)
            for i in range(per):
                producer.send_async(os.urandom(50).hex().encode(), None, partition_key=f"k{i % 97}",
                                    properties={"i": str(i)})
            producer.flush()
            for name, share in SUBSCRIPTIONS.items():
                cons = subs[name]
                for _ in range(per):
                    m = cons.receive(30_000)
                    if rng.random() < share:
                        cons.acknowledge(m)
                cons.close()
        dlq_topic = f"persistent://{tenant}/app/orders"
        cons = client.subscribe(dlq_topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100,
                                properties={"letterbox.dlq.max_redeliveries": "1"})
        producer = client.create_producer(dlq_topic)
        for i in range(200):
            producer.send(f"poison {i}".encode())
        for _ in range(400):  # each delivered twice, nacked twice: dead-lettered by the broker
            cons.negative_acknowledge(cons.receive(30_000))
        cons.close()
    finally:
        client.close()


def run(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the child, and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")})
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:5])} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return seconds, max(peak, before) / 1024, done.stdout + done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--topics", type=int, default=10)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="migrate-rate-"))
    given = os.environ.get("LETTERBOX_REFERENCE_URLS", "").split()
    ref = None if given else Pulsar(tmp)
    lb = Broker(tmp / "data", sync="full", log=tmp / "broker.log").start()
    try:
        if ref is not None:
            ref.start()
        target_url, target_admin = (given[0], given[1]) if given else (ref.service_url, ref.admin_url)  # type: ignore[union-attr]
        tenant = f"rate{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        fill(lb.url, lb.admin_url(), tenant, a.topics, a.messages)
        fill_s = time.perf_counter() - t0
        base = [sys.executable, "-m", "letterbox", "migrate", "--service-url", lb.url, "--admin-url", lb.admin_url(),
                "--target-url", target_url, "--target-admin-url", target_admin, "--tenant", tenant]
        seconds, rss, _ = run(base)
        verify_s, verify_rss, out = run([*base, "--verify"])
        total = a.messages + 200
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
              f"{[round(x, 2) for x in os.getloadavg()]}; fill took {fill_s:.0f} s\n")
        print("| messages | topics (partitioned) | migrate s | msg/s | migrate peak RSS MB "
              "| rerun with --verify s | its peak RSS MB |\n|---|---|---|---|---|---|---|")
        print(f"| {total:,} | {a.topics + 2} (2) | {seconds:.1f} "
              f"| {total / seconds:,.0f} | {rss:.0f} | {verify_s:.1f} | {verify_rss:.0f} |")
        print("\n" + next((line for line in out.splitlines() if line.startswith("verified")), out[-500:]))
    finally:
        lb.stop()
        if ref is not None:
            ref.stop()


if __name__ == "__main__":
    main()
