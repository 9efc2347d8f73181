"""Failure groups of a large dead letter topic: the time of one groups listing, and its counts.

    .venv/bin/python benchmarks/dlq_groups_scale.py [--messages 30000] [--runs 3]

Starts letterbox, fills a dead letter topic with --messages dead letters of three causes (half
`max-redeliveries` with `db.Timeout` and a text whose numbers and request ids differ on every
message, a third `terminated` with `ValueError` and a quoted value that differs, a sixth `expired`
without class or text: tests/admin/test_dead_letter_groups.py's causes), then times
GET .../letterbox/deadLetters/groups --runs times and checks it lists exactly three groups with
the counts it was filled with (exit 1 otherwise).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pulsar
from _broker import Broker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.admin.test_dead_letter_groups import T, _cause, _fill  # noqa: E402  (the suite's own causes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=30_000, help="a multiple of 6")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    want: dict[str | None, int] = {}
    for i in range(a.messages):
        reason = _cause(i)["DEAD_LETTER_REASON"]
        want[reason] = want.get(reason, 0) + 1
    tmp = Path(tempfile.mkdtemp(prefix="dlq-groups-"))
    with Broker(tmp / "data", sync="full", log=tmp / "broker.log").start() as b:
        client = pulsar.Client(b.url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        t0 = time.perf_counter()
        _fill(client, "big-DLQ", a.messages)
        fill_s = time.perf_counter() - t0
        client.close()
        url = f"{b.admin_url()}/admin/v2/{T.replace('://', '/')}big-DLQ/letterbox/deadLetters/groups"
        times, answer = [], {}
        for _ in range(a.runs):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=600) as r:
                answer = json.load(r)
            times.append(time.perf_counter() - t0)
    got = {g["reason"]: g["count"] for g in answer["groups"]}
    exact = len(answer["groups"]) == 3 and got == want and answer["messages"] == a.messages
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
          f"{[round(x, 2) for x in os.getloadavg()]}; filled in {fill_s:.1f} s\n")
    print("| dead letters | groups listed (reason: count) | listing s (each run) | exact |\n|---|---|---|---|")
    print(f"| {a.messages:,} | {', '.join(f'{k}: {v:,}' for k, v in got.items())} "
          f"| {' / '.join(f'{t:.2f}' for t in times)} | {'yes' if exact else 'NO'} |")
    if not exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
