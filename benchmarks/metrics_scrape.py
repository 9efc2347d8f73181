"""/metrics at scale: a healthy producer's latency while /metrics is scraped.

    .venv/bin/python benchmarks/metrics_scrape.py --topics 20000 --seconds 30

Seeds a data directory with N persistent topics, each with one durable
subscription (written through the storage layer before the broker starts), then
starts a broker on it. One producer sends a 100-byte message every 10 ms
(synchronous send: latency = send -> receipt) for --seconds without scraping,
then for --seconds while another process GETs /metrics every second. Reports
produce latency p50/p99/max for both phases and the scrape durations.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _broker import Broker

from letterbox.storage.store import Store

_ADMIN = re.compile(r"admin on http://[\d.]+:(\d+)")


async def seed(data_dir: Path, topics: int) -> None:
    store = Store(data_dir, sync="off")
    await store.start()
    for i in range(topics):
        store.open_ledger(f"persistent://public/default/idle-{i}").open_cursor("sub", "earliest")
        if i % 1000 == 999:
            await store.barrier()
    store._flush_dirty_cursors()
    await store.barrier()
    await store.close()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def produce_for(url: str, seconds: float) -> list[float]:
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=60,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    producer = client.create_producer("persistent://public/default/healthy", batching_enabled=False)
    latencies: list[float] = []
    payload = b"x" * 100
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        producer.send(payload)
        latencies.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.01)
    client.close()
    return latencies


def scrape_every_second(admin: str, seconds: float) -> None:
    """Run as its own process (like a Prometheus server): print scrape durations (ms)."""
    out: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        with urllib.request.urlopen(admin + "/metrics", timeout=60) as resp:
            resp.read()
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--scrape", metavar="ADMIN_URL", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scrape:
        scrape_every_second(args.scrape, args.seconds)
        return
    with tempfile.TemporaryDirectory(prefix="lb-metrics-") as tmp:
        data = Path(tmp) / "data"
        t0 = time.perf_counter()
        asyncio.run(seed(data, args.topics))
        seeded = time.perf_counter() - t0
        with Broker(data).start() as broker:
            m = _ADMIN.search(broker.log.read_text(errors="replace"))
            assert m, "no admin port in the broker log"
            admin = f"http://127.0.0.1:{m.group(1)}"
            t0 = time.perf_counter()
            with urllib.request.urlopen(admin + "/metrics", timeout=120) as resp:
                first_size = len(resp.read())
            first_scrape = (time.perf_counter() - t0) * 1000
            quiet = produce_for(broker.url, args.seconds)
            scraper = subprocess.Popen(
                [sys.executable, __file__, "--scrape", admin, "--seconds", str(args.seconds)],
                stdout=subprocess.PIPE, text=True)
            busy = produce_for(broker.url, args.seconds)
            durations = json.loads(scraper.communicate(timeout=args.seconds + 120)[0])
    report = {
        "topics": args.topics, "seed_seconds": round(seeded, 1),
        "first_scrape_ms": round(first_scrape), "metrics_bytes": first_size,
        "scrapes": len(durations), "scrape_ms_median": round(statistics.median(durations), 1),
        "scrape_ms_max": round(max(durations), 1),
        "no_scrape": {"sends": len(quiet), "p50_ms": round(pct(quiet, 50), 2),
                      "p99_ms": round(pct(quiet, 99), 2), "max_ms": round(max(quiet), 2)},
        "scraped_every_second": {"sends": len(busy), "p50_ms": round(pct(busy, 50), 2),
                                 "p99_ms": round(pct(busy, 99), 2), "max_ms": round(max(busy), 2)},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
