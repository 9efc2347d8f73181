"""The broker's longest event-loop stall while it counts and redrives a large dead letter topic.

    .venv/bin/python benchmarks/redrive_loop_stall.py --messages 200000

Puts --messages dead letters of subscription S1 in `stall-S1-DLQ` (produced there, unbatched,
with the stamps a broker dead-letter move writes), then, while a probe thread sends a tiny
admin request (GET /admin/v2/letterbox/clock) back to back and records each answer's
latency, runs in turn: the DLQ summary (GET .../letterbox/deadLetterTopics), a dry-run
redrive (the counting scan alone), and the redrive of every message (one admin call, the
broker's chunks of up to 1,000). A request that waits behind a loop turn answers late, so the
probe's worst latency in each phase is the longest stall the broker's clients saw (plus
the probe's own ~1 ms). An idle phase first gives the baseline.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from _broker import Broker
from redrive_subscription import P, backlog, call, prepare


class Probe(threading.Thread):
    """Back-to-back GETs of a cheap admin route: (sent, answered) perf_counter times."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.url = base + "/admin/v2/letterbox/clock"
        self.requests: list[tuple[float, float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=300) as resp:
                resp.read()
            self.requests.append((t0, time.perf_counter()))
            time.sleep(0.002)

    def during(self, start: float, end: float) -> list[float]:
        """Latencies of the requests that were waiting at some time in [start, end]."""
        return [b - a for a, b in list(self.requests) if b >= start and a <= end]


def summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values) or [0.0]
    return {"probes": len(ordered), "max_ms": round(ordered[-1] * 1000, 1),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1 if len(ordered) > 1 else 0] * 1000, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--sync", default="normal", choices=("full", "normal", "off"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lb-stall-"))
    try:
        with Broker(tmp / "data", sync=args.sync).start() as broker:
            base = broker.admin_url()
            t0 = time.perf_counter()
            prepare(base, broker.url, "stall", args.messages, 1)
            print(f"prepared {args.messages} dead letters in {time.perf_counter() - t0:.1f} s", flush=True)
            probe = Probe(base)
            probe.start()
            time.sleep(3)
            rows: list[dict[str, Any]] = []
            dlq = f"{P}/stall-S1-DLQ/letterbox"
            phases = [
                ("summary (GET deadLetterTopics)", "GET", "/admin/v2/namespaces/public/default/letterbox/deadLetterTopics", None),
                ("dry-run redrive (count)", "POST", f"{dlq}/redrive", {"dryRun": True}),
                ("redrive of every message", "POST", f"{dlq}/redrive", {}),
            ]
            now = time.perf_counter()
            rows.append({"phase": "idle (3 s)", "seconds": 3.0, **summary(probe.during(now - 3, now))})
            for name, method, path, body in phases:
                t1 = time.perf_counter()
                status, result = call(base, method, path, body)
                t2 = time.perf_counter()
                assert status == 200, (name, status, result)
                time.sleep(0.5)  # a probe stuck behind the phase's last stall answers meanwhile
                rows.append({"phase": name, "seconds": round(t2 - t1, 2), **summary(probe.during(t1, t2))})
                print(json.dumps(rows[-1]), flush=True)
            probe.done.set()
            probe.join(130)
            assert backlog(base, "stall", "S1") == args.messages, "not every message came back"
        print(f"\n{args.messages} dead letters, --sync {args.sync}\n")
        print("| phase | seconds | probes | worst probe latency (ms) | p99 (ms) |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['phase']} | {r['seconds']} | {r['probes']} | {r['max_ms']} | {r['p99_ms']} |")
    except BaseException:
        log = tmp / "broker.log"
        print("broker log tail:\n" + (log.read_text(errors="replace")[-3000:] if log.exists() else "(none)"))
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
