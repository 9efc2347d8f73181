"""Topic compaction cost: time from PUT .../compaction to SUCCESS, and the compacted
reader's read of the view, for --messages messages over --keys keys (unbatched, 100-byte
values), on one broker.

    .venv/bin/python benchmarks/compaction.py --messages 100000 --keys 1000

A durable subscription created first keeps every entry, so the run reads them all; the
script checks that a compacted reader gets exactly one message per key, each the latest.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pulsar
from _broker import Broker

P = "/admin/v2/persistent/public/default/"


def _call(base: str, method: str, path: str) -> Any:
    req = urllib.request.Request(base + path, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def run(base: str, url: str, messages: int, keys: int) -> dict[str, Any]:
    client = pulsar.Client(url)
    topic = "persistent://public/default/bench-compaction"
    keep = client.subscribe(topic, "keep", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    latest: dict[str, bytes] = {}
    for i in range(messages):
        key = f"k{i % keys}"
        value = f"{key}-{i}".encode().ljust(100, b".")
        producer.send_async(value, None, partition_key=key)
        latest[key] = value
    producer.flush()
    t0 = time.perf_counter()
    _call(base, "PUT", P + "bench-compaction/compaction")
    while (_call(base, "GET", P + "bench-compaction/compaction") or {}).get("status") == "RUNNING":
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    status = _call(base, "GET", P + "bench-compaction/compaction")
    assert status["status"] == "SUCCESS", status
    t0 = time.perf_counter()
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = {}
    while reader.has_message_available():
        msg = reader.read_next(timeout_millis=30_000)
        got[msg.partition_key()] = msg.data()
    read_seconds = time.perf_counter() - t0
    assert got == latest, "the compacted view is not the latest value per key"
    keep.close()
    client.close()
    return {"messages": messages, "keys": keys, "seconds": round(seconds, 2),
            "msg_per_s": round(messages / seconds), "view_read_seconds": round(read_seconds, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--sync", default="full", choices=("full", "normal", "off"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lb-compaction-"))
    try:
        with Broker(tmp / "data", sync=args.sync).start() as broker:
            row = run(broker.admin_url(), broker.url, args.messages, args.keys)
        print("| messages | keys | compaction seconds | msg/s compacted | compacted reader, whole view (s) |")
        print("|---|---|---|---|---|")
        print(f"| {row['messages']} | {row['keys']} | {row['seconds']} | {row['msg_per_s']} | "
              f"{row['view_read_seconds']} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
