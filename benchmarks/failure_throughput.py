"""The failure path's own throughput, letterbox beside Apache Pulsar, one command:

    .venv/bin/python benchmarks/failure_throughput.py     # or: make bench-failure
    .venv/bin/python benchmarks/failure_throughput.py --messages 2000 --runs 1   # a smoke run

Each system is started in turn on 127.0.0.1 with a fresh data directory and the same durability
(fsync before the receipt: letterbox `--sync full`, Apache Pulsar 4.0.8 standalone with
journalSyncData=true, as benchmarks/capacity.py starts them through benchmarks/_systems.py). The
load comes from a Java program on the official Java client (benchmarks/java, built by
`make bench-java`), one JVM per run, so the load generator is not a Python client. Per run, after an
untimed warm-up (1,000 messages nacked once), three phases on fresh topics, --messages N each,
unbatched 100-byte messages produced beforehand, one Shared consumer:

  redeliver   every message nacked on its first --rounds R deliveries, acked on the next;
              redeliveries/s = N * R / (subscribe() returned .. last ack)
  deadletter  every message nacked on every delivery until dead-lettered after
              --max-redeliveries k; moves/s = N / (subscribe() returned .. a consumer on
              `<topic>-work-DLQ` has each of the N). Then, once the source subscription's
              backlog is 0, a Reader counts the DLQ from its start: exact = N in total and
              N distinct (each failing message dead-lettered once, none lost)
  redrive     the N dead letters back to the source topic; redrive/s = N / (redrive start ..
              the source subscription's consumer has each of the N again)

How each system fails and redrives:

  letterbox         consumer property `letterbox.dlq.max_redeliveries` = k (broker-side
                    dead-lettering, no client DeadLetterPolicy); redrive: the broker's admin
                    redrive (POST .../{dlq}/letterbox/redrive, one call)
  pulsar            the Java client's DeadLetterPolicy(maxRedeliverCount = k), its only kind;
                    redrive as users do it: a Java consumer on the DLQ republishes each message
                    (payload, key, properties) to the source topic and acks it once sent
  letterbox-client  (optional) letterbox driven exactly like pulsar: the client's policy and
                    the republishing consumer

The nack delay is --nack-delay-ms (default 100): the Java client 4.0.8 raises any lower value to
100 ms (NegativeAcksTracker's minimum), so 100 ms is the smallest both brokers allow; the client,
not the broker, times nack redeliveries on both. Figures are the median of --runs runs on one
broker process; printed with each broker's peak RSS over its runs and the CPU probe before and
after each system (benchmarks/capacity.py's). `--json` prints every run as well. The exit status
is 1 when a phase did not complete or a dead-letter check was not exact.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from _broker import PeakRss
from _systems import ROOT, Letterbox, Pulsar, fresh, reference
from capacity import cpu_probe

JAR = ROOT / "benchmarks" / "java" / "target" / "letterbox-bench.jar"
JVM = ["-Xms512m", "-Xmx512m", "-XX:+UseG1GC"]
SYSTEMS = {  # name: (broker, --dlq, --redrive)
    "pulsar": ("pulsar", "client", "client"),
    "letterbox": ("letterbox", "broker", "broker"),
    "letterbox-client": ("letterbox", "client", "client"),
}
LABELS = {"pulsar": "Apache Pulsar 4.0.8 (client DeadLetterPolicy; republishing consumer)",
          "letterbox": "letterbox (broker-side dead-lettering; admin redrive)",
          "letterbox-client": "letterbox (client DeadLetterPolicy; republishing consumer)"}


def ensure_jar() -> None:
    if not JAR.exists():
        subprocess.run(["make", "-C", str(ROOT), "bench-java"], check=True)


def java_run(system: Pulsar | Letterbox, name: str, a: argparse.Namespace) -> dict[str, Any]:
    """One run of the Java program against a started broker: its JSON line."""
    _, dlq, redrive = SYSTEMS[name]
    prefix = f"persistent://public/default/ft-{uuid.uuid4().hex[:8]}"
    cmd = [reference.java(), *JVM, "-jar", str(JAR), "--service-url", system.service_url,
           "--admin-url", system.admin_url, "--prefix", prefix, "--messages", str(a.messages),
           "--rounds", str(a.rounds), "--max-redeliveries", str(a.max_redeliveries),
           "--nack-delay-ms", str(a.nack_delay_ms), "--dlq", dlq, "--redrive", redrive,
           "--timeout-s", str(a.timeout)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * a.timeout + 120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name}: the Java program exited {done.returncode}:\n{done.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def run_system(name: str, a: argparse.Namespace, runs: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    with fresh(SYSTEMS[name][0], f"failure-throughput-{name}") as system:
        system.start()
        rss = PeakRss(system.pid)
        rss.start()
        try:
            for i in range(a.runs):
                r = java_run(system, name, a)
                r.update(system=name, run=i + 1)
                runs.append(r)
                if not a.json:
                    print(f"  {name:<16} run {i + 1}: " + "  ".join(
                          f"{k} {r[p][k]:,.0f}/s" for p, k in PHASE_RATES), flush=True)
                    print(f"  {'':<16}        DLQ check: {check(r)}", flush=True)
        finally:
            meta["peak_rss_mb"][name] = rss.stop()


PHASE_RATES = (("redeliver", "redeliveries_per_s"), ("deadletter", "moves_per_s"), ("redrive", "redrive_per_s"))


def check(r: dict[str, Any]) -> str:
    """The exactness check of one run's dead-letter phase, in words."""
    d, n = r["deadletter"], r["messages"]
    verdict = "EXACT" if d["exact"] and d["completed"] else "NOT EXACT"
    return (f"{verdict}: {d['dlq_distinct']:,} distinct of {n:,} failing messages in the DLQ, "
            f"{d['dlq_total']:,} in total, source backlog {d['source_backlog']}")


def summarise(runs: list[dict[str, Any]], meta: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name in dict.fromkeys(r["system"] for r in runs):
        rs = [r for r in runs if r["system"] == name]
        row: dict[str, Any] = {"system": name, "runs": len(rs), "peak_rss_mb": meta["peak_rss_mb"].get(name)}
        for phase, key in PHASE_RATES:
            row[key] = statistics.median(r[phase][key] for r in rs)
            row[f"{phase}_completed"] = all(r[phase]["completed"] for r in rs)
        row["exact_runs"] = sum(bool(r["deadletter"]["exact"]) for r in rs)
        row["dlq_total"] = [r["deadletter"]["dlq_total"] for r in rs]
        row["dlq_distinct"] = [r["deadletter"]["dlq_distinct"] for r in rs]
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]], n: int) -> str:
    lines = ["| system | redeliveries/s | dead-letter moves/s | DLQ exact (runs) · total / distinct of N "
             "| redrive msg/s | peak RSS MB |", "|---|---|---|---|---|---|"]
    for r in rows:
        flags = "" if all(r[f"{p}_completed"] for p, _ in PHASE_RATES) else " (a phase did not complete)"
        counts = " · ".join(f"{t:,} / {d:,}" for t, d in zip(r["dlq_total"], r["dlq_distinct"], strict=True))
        lines.append(f"| {LABELS[r['system']]}{flags} | {r['redeliveries_per_s']:,.0f} | {r['moves_per_s']:,.0f} "
                     f"| {r['exact_runs']} of {r['runs']} · {counts} of {n:,} | {r['redrive_per_s']:,.0f} "
                     f"| {r['peak_rss_mb']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="pulsar,letterbox",
                    help="comma-separated: pulsar, letterbox, letterbox-client")
    ap.add_argument("--messages", type=int, default=100_000, help="N, per phase")
    ap.add_argument("--rounds", type=int, default=3, help="R: nacks per message in the redeliver phase")
    ap.add_argument("--max-redeliveries", type=int, default=3, help="k of the deadletter phase")
    ap.add_argument("--nack-delay-ms", type=int, default=100, help="the Java client raises lower values to 100")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=600, help="seconds allowed per phase")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    systems = [s for s in a.systems.split(",") if s]
    if bad := [s for s in systems if s not in SYSTEMS]:
        sys.exit(f"unknown system: {', '.join(bad)} (one of {', '.join(SYSTEMS)})")
    ensure_jar()
    if any(SYSTEMS[s][0] == "pulsar" for s in systems):
        reference.fetch()
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
                            "pulsar_version": reference.pulsar_version(), "messages": a.messages,
                            "rounds": a.rounds, "max_redeliveries": a.max_redeliveries,
                            "nack_delay_ms": a.nack_delay_ms, "runs": a.runs, "cpu_probe_s": [cpu_probe()],
                            "peak_rss_mb": {}}
    runs: list[dict[str, Any]] = []
    for name in systems:
        run_system(name, a, runs, meta)
        meta["cpu_probe_s"].append(cpu_probe())
    rows = summarise(runs, meta)
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows, "runs": runs}))
    else:
        print(f"\n{json.dumps(meta)}\n")
        print(table(rows, a.messages))
    if any(r["exact_runs"] < r["runs"] or not all(r[f"{p}_completed"] for p, _ in PHASE_RATES) for r in rows):
        sys.exit("a phase did not complete or a dead-letter check was not exact (see above)")


if __name__ == "__main__":
    main()
