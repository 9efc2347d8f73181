"""A second opinion on capacity: the Go client's own perf tool against letterbox and Apache Pulsar.

    make bench-go-perf      # builds build/pulsar-perf-go (benchmarks/goperf), then runs this
    .venv/bin/python benchmarks/capacity_go.py --duration 40 --runs 3

`pulsar-perf-go` is the perf tool of the official Go client (github.com/apache/pulsar-client-go,
package perf), built from the Go module proxy by `make bench-go` with benchmarks/goperf's go.mod.
As capacity.py does with the Java pulsar-perf, each system is started in turn with a fresh data
directory and the same durability (fsync before the receipt), and a `consume` and a `produce`
process run together on one fresh topic: the consumer first (Exclusive subscription `cap`), then
an unthrottled producer (`-r 0`) of --size-byte messages, batched as the Go tool always is (its
1 ms window, at most 1000 messages a batch, 1000 pending). The Go tool reports every 10 s; the
first report is dropped, a run's figure is the median of the others, a system's the median of
--runs runs. Publish latency is the tool's own (send to receipt). Printed: publish and
received msg/s, publish p50 / p99 ms, the broker's peak RSS and CPU per message.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _capacity_run import SUBSCRIPTION, GoPerf, measure, median
from _systems import Letterbox, Pulsar, fresh
from capacity import cpu_probe

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "build" / "pulsar-perf-go"


def run_once(system: Pulsar | Letterbox, size: int, duration: int) -> dict[str, Any]:
    topic = f"persistent://public/default/capgo-{uuid.uuid4().hex[:8]}"
    m = measure(system, GoPerf(TOOL), ["consume", "-s", SUBSCRIPTION, topic],
                ["produce", "-r", "0", "-s", str(size), topic], topic, False, duration, system.name)
    return {"system": system.name, "publish_msg_s": median(m.published, "rate"),
            "received_msg_s": median(m.received, "rate"), "publish_p50_ms": median(m.published, "p50_ms"),
            "publish_p99_ms": median(m.published, "p99_ms"), "peak_rss_mb": m.peak_rss_mb,
            "broker_cpu_us_per_msg": m.cpu_us_per_msg}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="pulsar,letterbox", help="comma-separated: pulsar, letterbox")
    ap.add_argument("--size", type=int, default=100, help="payload bytes")
    ap.add_argument("--duration", type=int, default=40, help="seconds per run (10 s reports; the first dropped)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not TOOL.exists():
        sys.exit(f"{TOOL} is missing: run `make bench-go` first")
    if a.duration < 30:
        sys.exit("--duration must be at least 30 s: the tool reports every 10 s and the first report is dropped")
    systems = [s for s in a.systems.split(",") if s]
    if bad := [s for s in systems if s not in ("pulsar", "letterbox")]:
        sys.exit(f"unknown system: {', '.join(bad)}")
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
                            "size": a.size, "duration_s": a.duration, "runs": a.runs, "cpu_probe_s": [cpu_probe()]}
    runs: list[dict[str, Any]] = []
    for name in systems:
        with fresh(name, f"capgo-{name}") as system:
            system.start()
            for run in range(a.runs):
                r = run_once(system, a.size, a.duration)
                runs.append({**r, "run": run + 1})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        meta["cpu_probe_s"].append(cpu_probe())
    rows = [{"system": s, **{k: round(statistics.median(r[k] for r in runs if r["system"] == s), 1)
                             for k in runs[0] if k not in ("system", "run")}} for s in systems]
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows, "runs": runs}))
        return
    print(f"\n{json.dumps(meta)}\n")
    print("| system | publish msg/s | received msg/s | publish p50 / p99 ms | peak RSS MB | broker CPU µs/msg |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['system']} | {r['publish_msg_s']:,.0f} | {r['received_msg_s']:,.0f} | {r['publish_p50_ms']} / "
              f"{r['publish_p99_ms']} | {r['peak_rss_mb']} | {r['broker_cpu_us_per_msg']} |")


if __name__ == "__main__":
    main()
