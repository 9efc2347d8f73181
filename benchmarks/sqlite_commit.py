"""Commit latency of SQLite alone, as letterbox's storage writer configures it (WAL, 16 KiB
pages, synchronous=FULL, the entries table and its index), at a fixed rate of small rows: the
floor under the broker's publish latency on this machine, without the broker.

    .venv/bin/python benchmarks/sqlite_commit.py --rate 5000 --rows-per-commit 10 --seconds 30

Every commit carries --rows-per-commit rows of --size bytes (a group commit of that many
unbatched messages); prints p50 / p99 / p99.9 / max commit time in ms and the process's user
and system CPU time per commit.
"""
from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import tempfile
import time
from pathlib import Path

from letterbox.storage.schema import open_writer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000, help="rows per second")
    ap.add_argument("--rows-per-commit", type=int, default=10)
    ap.add_argument("--size", type=int, default=150, help="bytes per row's data")
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sqlite-commit-") as tmp:
        conn: sqlite3.Connection = open_writer(Path(tmp) / "letterbox.db", "full")
        payload, entry, times = os.urandom(a.size), 0, []
        every = a.rows_per_commit / a.rate
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = due = time.perf_counter()
        while time.perf_counter() - start < a.seconds:
            due += every
            if (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            t = time.perf_counter()
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO entries (ledger_id, entry_id, publish_time, num_messages, size, data) "
                             "VALUES (1, ?, 0, 1, ?, ?)",
                             [(entry + i, a.size, payload) for i in range(a.rows_per_commit)])
            conn.execute("COMMIT")
            times.append((time.perf_counter() - t) * 1e3)
            entry += a.rows_per_commit
        after = resource.getrusage(resource.RUSAGE_SELF)
        elapsed = time.perf_counter() - start
        conn.close()
    times.sort()
    n = len(times)
    print(f"{n} commits of {a.rows_per_commit} rows at {a.rate:,} rows/s asked ({n / elapsed:,.0f} commits/s "
          f"done): p50 {times[n // 2]:.2f} ms, "
          f"p99 {times[int(n * 0.99)]:.2f} ms, p99.9 {times[int(n * 0.999)]:.2f} ms, max {times[-1]:.1f} ms; "
          f"CPU per commit: user {(after.ru_utime - before.ru_utime) / n * 1e6:.0f} µs, "
          f"system {(after.ru_stime - before.ru_stime) / n * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
