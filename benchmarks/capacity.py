"""letterbox beside Apache Pulsar under Pulsar's own load generator (pulsar-perf, Java), one command:

    .venv/bin/python benchmarks/capacity.py              # or: make bench-capacity

Each system is started in turn on 127.0.0.1 with a fresh data directory and the same durability
(fsync before the receipt: letterbox `--sync full`, Apache Pulsar standalone with
journalSyncData=true, conformance/pulsar/standalone.conf). The reference broker's jars, and
pulsar-perf with them, come from Maven Central into ~/.cache/letterbox (conformance/reference.py).
For each case a `pulsar-perf consume` and a `pulsar-perf produce` run together on one topic for
--duration seconds; pulsar-perf prints one line per 10 s interval, and the first interval (JIT
warm-up, connection set-up) is dropped. A case's figures are the median over the remaining
intervals of the median over --runs runs:

  max      -r far above what either broker takes: the sustained publish rate and the end-to-end
           (received) rate, for sizes --sizes, batching on (pulsar-perf's 1 ms window) and off,
           --producers producers, one topic and a topic of 16 partitions; at most 1,000 sends
           in flight over all producers and partitions (Apache Pulsar stops reading a
           connection with more pending)
  rate     fixed rates (--rates, unbatched, one producer): publish latency (send to receipt) and
           end-to-end latency (publish time to receipt by the consumer) at p50, p99 and p99.9

Besides them, per system: start-up to the first receipt (process start until a producer's first
send is acknowledged, official Python client), peak RSS of the broker process over the run, its
CPU per message, and the machine's pace before and after (CPU probe, as benchmarks/peers.py).
`--json` prints every interval as well.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _capacity_run import SUBSCRIPTION, PulsarPerf, Report, measure, median
from _systems import Letterbox, Pulsar, fresh

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from conformance import reference  # noqa: E402  (the repository's own reference-broker module)

FAR_ABOVE = 10_000_000  # msg/s asked for in "max" cases: pulsar-perf refuses 0


IN_FLIGHT = 1000  # Apache Pulsar's maxPendingPublishRequestsPerConnection


@dataclass(frozen=True)
class Case:
    kind: str  # "max" or "rate"
    size: int
    batching: bool
    producers: int
    partitions: int  # 0: one non-partitioned topic
    rate: int = FAR_ABOVE

    @property
    def outstanding(self) -> int:
        """pulsar-perf's -o (sends in flight per producer, and per partition of a partitioned
        one): IN_FLIGHT over all of them, which share one connection. Apache Pulsar stops
        reading a connection with more publishes pending than that and 4.0.8 did not resume
        it until its keep-alive closed the connection (16 producers at 1,000 each: 1,703
        messages, then nothing for a minute)."""
        return max(1, IN_FLIGHT // (self.producers * max(1, self.partitions)))

    @property
    def label(self) -> str:
        where = f"{self.partitions} partitions" if self.partitions else "1 topic"
        what = "max" if self.kind == "max" else f"{self.rate:,} msg/s"
        return (f"{what}, {self.size} B, {'batched' if self.batching else 'unbatched'}, "
                f"{self.producers} producer{'s' if self.producers > 1 else ''}, {where}")


class FirstReceipt(threading.Thread):
    """Process start until a producer's first send is acknowledged (official Python client),
    probed while the system starts: a TCP connect to its service port every 5 ms until the
    port accepts, then a send, retried every 20 ms until it is receipted. Both systems'
    service ports are chosen before the start, so neither waits for a log line or its admin
    server. The client library is imported before the start, so its import does not share the
    CPU with the starting system. `seconds` once joined."""

    def __init__(self, system: Pulsar | Letterbox, timeout: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.system, self.timeout, self.seconds = system, timeout, float("nan")
        import pulsar  # the official client: what a user's first send goes through

        self.pulsar = pulsar

    def run(self) -> None:
        import socket

        pulsar = self.pulsar
        url = self.system.service_url
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        topic = f"persistent://public/default/first-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
            except OSError:
                time.sleep(0.005)
                continue
            try:
                client = pulsar.Client(url, operation_timeout_seconds=5, connection_timeout_ms=1000, logger=_silent())
                try:
                    client.create_producer(topic, send_timeout_millis=5000).send(b"first")
                    self.seconds = time.monotonic() - self.system.started_at
                    return
                finally:
                    client.close()
            except Exception:  # listening, but the namespace or the topic is not served yet
                time.sleep(0.02)


def _silent() -> Any:
    import logging

    log = logging.getLogger("capacity.pulsar-client")
    log.setLevel(logging.CRITICAL)
    return log


def run_case(system: Pulsar | Letterbox, case: Case, duration: int) -> dict[str, Any]:
    topic = f"persistent://public/default/cap-{uuid.uuid4().hex[:8]}"
    consume = ["consume", "-ss", SUBSCRIPTION, "-sp", "Earliest", "-time", str(duration + 2), topic]
    produce = ["produce", "-r", str(case.rate), "-s", str(case.size), "-n", str(case.producers), "-time",
               str(duration), "-o", str(case.outstanding), *([] if case.batching else ["-db"]),
               topic]  # a partitioned topic is created beforehand (below), not by pulsar-perf's -np
    if case.partitions:  # the consumer subscribes first: the topic must exist with its partitions
        _create_partitioned(system.admin_url, topic, case.partitions)
    m = measure(system, PulsarPerf(), consume, produce, topic, bool(case.partitions), duration,
                f"{system.name}, {case.label}")

    def med(rows: list[Report], key: str) -> float:
        return round(median(rows, key), 2)

    pub, rec = m.published, m.received
    return {
        "system": system.name, "case": case.label, "kind": case.kind,
        "publish_msg_s": med(pub, "rate"), "received_msg_s": med(rec, "rate"),
        "publish_p50_ms": med(pub, "p50_ms"), "publish_p99_ms": med(pub, "p99_ms"),
        "publish_p999_ms": med(pub, "p999_ms"), "e2e_p50_ms": med(rec, "p50_ms"),
        "e2e_p99_ms": med(rec, "p99_ms"), "e2e_p999_ms": med(rec, "p999_ms"),
        "peak_rss_mb": m.peak_rss_mb, "broker_cpu_us_per_msg": m.cpu_us_per_msg,
        "intervals": {"publish": pub, "received": rec},
    }


def _create_partitioned(admin_url: str, topic: str, partitions: int) -> None:
    import urllib.request

    path = topic.replace("persistent://", "persistent/")
    req = urllib.request.Request(f"{admin_url}/admin/v2/{path}/partitions", data=str(partitions).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


def cases(a: argparse.Namespace) -> list[Case]:
    out: list[Case] = []
    if "max" in a.cases:
        for size in a.sizes:
            for batching in (False, True):
                for producers in a.producers:
                    for partitions in a.partitions:
                        out.append(Case("max", size, batching, producers, partitions))
    if "rate" in a.cases:
        out += [Case("rate", 100, False, 1, 0, rate) for rate in a.rates]
    return out


def cpu_probe() -> float:
    t0 = time.process_time()
    sum(range(30_000_000))
    return round(time.process_time() - t0, 3)


def run_system(name: str, a: argparse.Namespace, out: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    with fresh(name, f"capacity-{name}") as system:
        first = FirstReceipt(system)
        first.start()
        system.start()
        first.join()
        meta[f"{name}_first_receipt_s"] = round(first.seconds, 2)
        for case in cases(a):
            for run in range(a.runs):
                r = run_case(system, case, a.duration)
                r["run"] = run + 1
                out.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)  # each run kept, whatever follows
                if not a.json:
                    print(f"  {name:<9} {case.label:<58} run {run + 1}: publish {r['publish_msg_s']:>10,.0f} msg/s "
                          f"received {r['received_msg_s']:>10,.0f}  p99 {r['publish_p99_ms']} / {r['e2e_p99_ms']} ms  "
                          f"RSS {r['peak_rss_mb']} MB", flush=True)


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for label in dict.fromkeys(r["case"] for r in runs):
        for system in dict.fromkeys(r["system"] for r in runs):
            rs = [r for r in runs if r["case"] == label and r["system"] == system]
            if rs:
                keys = [k for k, v in rs[0].items() if isinstance(v, int | float) and k != "run"]
                rows.append({"case": label, "system": system, "kind": rs[0]["kind"],
                             **{k: statistics.median(r[k] for r in rs) for k in keys}})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| case | system | publish msg/s | received msg/s | publish p50 / p99 / p99.9 ms "
             "| end-to-end p50 / p99 / p99.9 ms | peak RSS MB | broker CPU µs/msg |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['system']} | {r['publish_msg_s']:,.0f} | {r['received_msg_s']:,.0f} "
                     f"| {r['publish_p50_ms']} / {r['publish_p99_ms']} / {r['publish_p999_ms']} "
                     f"| {r['e2e_p50_ms']} / {r['e2e_p99_ms']} / {r['e2e_p999_ms']} | {r['peak_rss_mb']} "
                     f"| {r['broker_cpu_us_per_msg']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="pulsar,letterbox", help="comma-separated: pulsar, letterbox")
    ap.add_argument("--cases", default="max,rate", help="comma-separated: max, rate")
    ap.add_argument("--sizes", default="100,1024", help="payload bytes of the max cases")
    ap.add_argument("--producers", default="1,16", help="producer counts of the max cases")
    ap.add_argument("--partitions", default="0,16", help="0 (one topic) and/or a partition count")
    ap.add_argument("--rates", default="1000,5000,10000,20000", help="msg/s of the rate cases")
    ap.add_argument("--duration", type=int, default=40, help="seconds per run (10 s intervals; the first dropped)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    systems = [s for s in a.systems.split(",") if s]
    a.cases = [c for c in a.cases.split(",") if c]
    if bad := [s for s in systems if s not in ("pulsar", "letterbox")] + [c for c in a.cases if c not in ("max", "rate")]:
        sys.exit(f"unknown system or case kind: {', '.join(bad)}")
    if a.duration < 20:
        sys.exit("--duration must be at least 20 s: pulsar-perf reports every 10 s and the first report is dropped")
    a.sizes, a.producers, a.partitions, a.rates = ([int(x) for x in v.split(",") if x]
                                                   for v in (a.sizes, a.producers, a.partitions, a.rates))
    reference.fetch()  # pulsar-perf comes with the reference broker's jars, whichever systems run
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
                            "pulsar_version": reference.pulsar_version(), "duration_s": a.duration,
                            "runs": a.runs, "cpu_probe_s": [cpu_probe()]}
    runs: list[dict[str, Any]] = []
    for name in systems:
        run_system(name, a, runs, meta)
        meta["cpu_probe_s"].append(cpu_probe())
    rows = summarise(runs)
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows, "runs": runs}))
        return
    print(f"\n{json.dumps(meta)}\n")
    print(table(rows))


if __name__ == "__main__":
    main()
