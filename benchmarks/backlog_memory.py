"""Broker memory with a large backlog: a subscription exists (so every message is
retained) but no consumer is connected while N 100-byte messages are produced.

    .venv/bin/python benchmarks/backlog_memory.py --messages 2000000

Reports the broker's VmRSS / VmHWM after producing, and again after a restart on
the same data dir, with the recovery time (process start .. listening, and
.. first backlog message delivered to the existing subscription).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from _broker import Broker, memory_mb

from letterbox.cli.perf import run_produce


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def first_message_seconds(url: str, topic: str, sub: str) -> float:
    import pulsar

    t0 = time.perf_counter()
    client = pulsar.Client(url, operation_timeout_seconds=120)
    try:
        consumer = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        consumer.receive(timeout_millis=120_000)
        seconds = time.perf_counter() - t0
        consumer.close()  # no ack: the backlog stays as it was
        return seconds
    finally:
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--sync", choices=["full", "normal", "off"], default="full")
    ap.add_argument("--keep", action="store_true", help="keep the temp data dir")
    a = ap.parse_args()

    import pulsar

    tmp = Path(tempfile.mkdtemp(prefix="letterbox-backlog-"))
    data = tmp / "data"
    topic, sub = "backlog", "retain"
    out: dict[str, object] = {"messages": a.messages, "size": a.size, "sync": a.sync}
    broker = Broker(data, sync=a.sync, log=tmp / "broker.log").start()
    try:
        out["rss_idle_mb"] = round(memory_mb(broker.pid)["VmRSS"], 1)
        client = pulsar.Client(broker.url)
        client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared).close()
        client.close()

        r = run_produce(broker.url, topic, a.messages, a.size, batching=True)
        out["produce_msgs_per_sec"] = round(r.msgs_per_sec)
        time.sleep(2)  # let the broker settle (pending writes, receipts)
        mem = memory_mb(broker.pid)
        out["after_produce"] = {"VmRSS_mb": round(mem["VmRSS"], 1), "VmHWM_mb": round(mem["VmHWM"], 1)}
        out["data_dir_mb"] = round(du_mb(data), 1)
        broker.stop()

        t0 = time.perf_counter()
        broker = Broker(data, sync=a.sync, log=tmp / "broker2.log").start()
        out["restart_listening_seconds"] = round(time.perf_counter() - t0, 2)
        mem = memory_mb(broker.pid)
        out["after_restart"] = {"VmRSS_mb": round(mem["VmRSS"], 1), "VmHWM_mb": round(mem["VmHWM"], 1)}
        out["first_backlog_message_seconds"] = round(first_message_seconds(broker.url, topic, sub), 2)
        mem = memory_mb(broker.pid)
        out["after_restart_topic_loaded"] = {"VmRSS_mb": round(mem["VmRSS"], 1), "VmHWM_mb": round(mem["VmHWM"], 1)}
    finally:
        broker.stop()
        if not a.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
