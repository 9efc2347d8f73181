"""`letterbox backup` of a running broker during a produce at full speed and a background
redrive; then restore, verify, and read the restored copy back.

    python benchmarks/backup_under_load.py --preload 200000 --dead-letters 20000

A broker gets --preload messages of --size bytes (so the copy has something to copy), a DLQ
of --dead-letters dead letters whose redrive runs as a background task, and a producer that
sends as fast as it is receipted. Once both run, `letterbox backup` copies the data dir; the
messages receipted before it began must all be in the restored copy, which must pass
`letterbox verify`. Prints one table row, and the start-up checks' times on the copy.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
from _broker import Broker

from letterbox.storage.integrity import scan_wal
from letterbox.storage.start_checks import quick_check

P = "/admin/v2/persistent/public/default"
TOPIC = "persistent://public/default/backed-up"
QUIET = logging.getLogger("pulsar-client")
QUIET.setLevel(logging.ERROR)


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True)
    return time.perf_counter() - t0, r


def send_all(producer: Any, bodies: Any, done: list[int]) -> None:
    for i, body in bodies:
        producer.send_async(body, lambda res, _m, i=i: res == pulsar.Result.Ok and done.append(i))
    producer.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preload", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--dead-letters", type=int, default=20_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lb-backup-"))
    broker = Broker(tmp / "data").start()
    base = broker.admin_url()
    client = pulsar.Client(broker.url, operation_timeout_seconds=60, logger=QUIET)
    pad = b"p" * args.size
    producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_publish_delay_ms=5,
                                      max_pending_messages=5000, block_if_queue_full=True)
    done: list[int] = []
    send_all(producer, ((i, b"%09d" % i + pad) for i in range(args.preload)), done)
    dlq = client.create_producer(f"{TOPIC}-S1-DLQ", max_pending_messages=5000, block_if_queue_full=True)
    call(base, "PUT", f"{P}/backed-up/subscription/S1", "earliest")
    for i in range(args.dead_letters):
        dlq.send_async(b"d%d" % i, None, properties={
            "REAL_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": f"1:{i}:-1:-1", "DEAD_LETTER_REASON": "expired",
            "DEAD_LETTER_SUBSCRIPTION": "S1", "DEAD_LETTER_TIME": str(int(time.time() * 1000))})
    dlq.flush()
    stop = threading.Event()
    counter = iter(range(args.preload, 10**9))

    def live() -> None:  # one stream of sends until stopped: no flush (a stall) before the end
        def bodies() -> Iterator[tuple[int, bytes]]:
            for i in counter:
                if stop.is_set():
                    return
                yield i, b"%09d" % i + pad

        send_all(producer, bodies(), done)

    thread = threading.Thread(target=live)
    thread.start()
    task = call(base, "POST", f"{P}/backed-up-S1-DLQ/letterbox/redrive", {"background": True})
    n_start, t_start = len(done), time.perf_counter()
    time.sleep(3)
    n0, t0 = len(done), time.perf_counter()
    rate_before = (n0 - n_start) / (t0 - t_start)
    before = set(done)
    seconds, r = cli("backup", str(tmp / "backup"), "--data-dir", str(tmp / "data"))
    rate = (len(done) - n0) / (time.perf_counter() - t0)
    redrive = call(base, "GET", f"{P}/backed-up-S1-DLQ/letterbox/redrive/{task['taskId']}")
    stop.set()
    thread.join()
    client.close()
    broker.stop()
    assert r.returncode == 0, r.stderr
    restore_s, rr = cli("restore", str(tmp / "backup"), "--data-dir", str(tmp / "restored"))
    assert rr.returncode == 0, rr.stderr
    verify_s, vr = cli("verify", "--data-dir", str(tmp / "restored"))
    db = tmp / "restored" / "letterbox.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    t = time.perf_counter()
    problems = quick_check(conn)
    quick_s = time.perf_counter() - t
    conn.close()
    t = time.perf_counter()
    scan_wal(Path(f"{tmp / 'data' / 'letterbox.db'}-wal"))
    wal_s = time.perf_counter() - t
    wal_mb = Path(f"{tmp / 'data' / 'letterbox.db'}-wal").stat().st_size / 1e6
    restored = Broker(tmp / "restored").start()
    c2 = pulsar.Client(restored.url, operation_timeout_seconds=60, logger=QUIET)
    reader = c2.create_reader(TOPIC, pulsar.MessageId.earliest, receiver_queue_size=5000)
    got: set[int] = set()
    while reader.has_message_available():
        body = reader.read_next(10_000).data()
        if body[:1] != b"d":
            got.add(int(body[:9]))
    c2.close()
    restored.stop()
    missing = len(before - got)
    print("| db MB | backup s | produce msg/s before the backup | produce msg/s during it | redrive during it | restore s | verify s "
          "| verify | quick_check s | receipted before | missing after restore |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {db.stat().st_size / 1e6:.0f} | {seconds:.1f} | {rate_before:,.0f} | {rate:,.0f} | {redrive['state']}, {redrive['moved']} "
          f"moved | {restore_s:.1f} | {verify_s:.1f} | {'ok' if vr.returncode == 0 else vr.stdout[-300:]} | "
          f"{quick_s:.2f}{' ' + str(problems) if problems else ''} | {len(before):,} | {missing} |")
    print(f"\nWAL scan of the source's {wal_mb:.0f} MB WAL after the stop: {wal_s:.2f} s; broker start on the "
          f"restored copy: {restored.startup_seconds:.1f} s")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
