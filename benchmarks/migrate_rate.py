"""`letterbox migrate` onto Apache Pulsar: its rate and its memory, one command:

    .venv/bin/python benchmarks/migrate_rate.py [--messages 100000] [--topics 10]

Starts letterbox (`--sync full`) and the reference Apache Pulsar standalone (conformance/reference.py;
or uses one already running: LETTERBOX_REFERENCE_URLS="pulsar://... http://..."), fills a tenant
on letterbox with the fixture of _migrate_fixture.py -- --topics topics, two of them partitioned
(3 partitions), --messages messages in all, 100 B each, three subscriptions per topic
acknowledging about 30 %, 50 % and 70 % of the messages out of order, two dead letter topics and
a retry topic -- then
times `letterbox migrate --tenant T` (a child process: wall time, peak RSS from getrusage) and
its `--verify`, and prints one table row. The machine's load is printed beside it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _broker import Broker
from _migrate_fixture import fill, timed
from _systems import Pulsar


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
        fx = fill(lb.url, lb.admin_url(), tenant, a.topics, a.messages)
        fill_s = time.perf_counter() - t0
        base = [sys.executable, "-m", "letterbox", "migrate", "--service-url", lb.url, "--admin-url", lb.admin_url(),
                "--target-url", target_url, "--target-admin-url", target_admin, "--tenant", tenant]
        seconds, rss, _, _ = timed(base)
        verify_s, verify_rss, out, _ = timed([*base, "--verify"])
        total = fx.messages
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
              f"{[round(x, 2) for x in os.getloadavg()]}; fill took {fill_s:.0f} s\n")
        print("| messages | topics (partitioned) | migrate s | msg/s | migrate peak RSS MB "
              "| rerun with --verify s | its peak RSS MB |\n|---|---|---|---|---|---|---|")
        print(f"| {total:,} | {fx.topics} (2) | {seconds:.1f} "
              f"| {total / seconds:,.0f} | {rss:.0f} | {verify_s:.1f} | {verify_rss:.0f} |")
        print("\n" + next((line for line in out.splitlines() if line.startswith("verified")), out[-500:]))
    finally:
        lb.stop()
        if ref is not None:
            ref.stop()


if __name__ == "__main__":
    main()
