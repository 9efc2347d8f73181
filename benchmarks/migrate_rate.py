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
import time

from _migrate_fixture import filled, timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--topics", type=int, default=10)
    a = ap.parse_args()
    with filled("migrate-rate", a.topics, a.messages) as f:
        fx, fill_s, base = f.fixture, f.fill_s, f.migrate
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


if __name__ == "__main__":
    main()
