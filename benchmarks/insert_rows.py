"""Micro-benchmark of the writer's entry inserts (issue 13): `executemany(INSERT_ENTRY)` (one
statement step per row, the GIL let go and taken back around each) against
`ops.insert_entries` (multi-row statements), in the writer's schema and pragmas, one group of
--rows rows per transaction, with and without a busy Python thread holding the GIL between
steps the way the event loop does under load. Prints the writer thread's CPU per row.

    python benchmarks/insert_rows.py [--rows 250] [--groups 400]
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from pathlib import Path

from letterbox.storage.ops import INSERT_ENTRY, insert_entries
from letterbox.storage.schema import open_writer


def run(way: str, rows_per_group: int, groups: int, busy: bool) -> float:
    conn = open_writer(Path(tempfile.mkdtemp()) / "letterbox.db", "full")
    ids = itertools.count()
    spinning = [busy]

    def spin() -> None:
        x = 0
        while spinning[0]:
            x += 1

    spinner = threading.Thread(target=spin)
    if busy:
        spinner.start()
    out: list[float] = []

    def write() -> None:
        c0 = time.thread_time()
        for _ in range(groups):
            rows = [(1, next(ids), 1_795_485_980_845, 1, 180, b"x" * 180) for _ in range(rows_per_group)]
            conn.execute("BEGIN")
            if way == "executemany":
                conn.executemany(INSERT_ENTRY, rows)
            else:
                insert_entries(conn, rows)
            conn.execute("COMMIT")
        out.append(time.thread_time() - c0)

    writer = threading.Thread(target=write)
    writer.start()
    writer.join()
    spinning[0] = False
    if busy:
        spinner.join()
    conn.close()
    return out[0] * 1e6 / (groups * rows_per_group)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=250)
    ap.add_argument("--groups", type=int, default=400)
    a = ap.parse_args()
    for busy in (False, True):
        for way in ("executemany", "insert_entries"):
            us = run(way, a.rows, a.groups, busy)
            print(f"{way:15} busy thread {'yes' if busy else 'no ':3}  writer CPU {us:6.2f} us/row")


if __name__ == "__main__":
    main()
