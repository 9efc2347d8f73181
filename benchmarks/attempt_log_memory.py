"""Delivery attempt log: broker memory with N messages in redelivery, each with R attempts.

    .venv/bin/python benchmarks/attempt_log_memory.py --messages 100000 --rounds 10

The broker runs on the manual test clock (--clock manual --allow-test-clock). N 100-byte
messages are produced (batching off); one official-client Shared consumer whose
properties set a 1-hour redelivery backoff and a dead-letter limit above R receives
every message and nacks it: each nack is one attempt in the message's log, and the
backoff holds the message in the broker (in redelivery). Once the broker's CPU time is
quiet for 3 s, its VmRSS / VmHWM and the size of the subscription's state record (which
holds the counts and times) and of its attempt_logs rows are read; the clock is then advanced 2 hours
so every message is delivered again, for R rounds. After R rounds every message has
min(R, attempt_log_size) attempts: with R = 10 the log is full (default size 10).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _broker import cpu_seconds, memory_mb

TOPIC, SUB = "persistent://public/default/attempts-mem", "attempts-mem-sub"
_ADMIN = re.compile(r"admin on http://([\d.]+):(\d+)")
_LISTEN = re.compile(r"listening on pulsar://([\d.]+):(\d+)")


def start(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    cmd = [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(data), "--port", "0",
           "--admin-port", "0", "--bind", "127.0.0.1", "--clock", "manual", "--allow-test-clock"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        text = log.read_text(errors="replace")
        m, a = _LISTEN.search(text), _ADMIN.search(text)
        if m and a:
            return proc, f"pulsar://{m.group(1)}:{m.group(2)}", f"http://{a.group(1)}:{a.group(2)}"
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"broker did not start; see {log}")


def wait_cpu_quiet(pid: int, quiet_s: float = 3.0) -> None:
    last, since = cpu_seconds(pid) or 0.0, time.time()
    while time.time() - since < quiet_s:
        time.sleep(0.25)
        now = cpu_seconds(pid) or 0.0
        if now - last > 0.01:
            last, since = now, time.time()


def stored_bytes(data: Path) -> tuple[int, int, int]:
    """(the subscription's state record, its attempt log rows, how many rows) in bytes / rows."""
    conn = sqlite3.connect(f"file:{data / 'letterbox.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, length(state) FROM cursors").fetchall()
        logs = conn.execute("SELECT COALESCE(SUM(length(attempts)), 0), COUNT(*) FROM attempt_logs "
                            "WHERE cursor = ?", (SUB,)).fetchone()
    finally:
        conn.close()
    return max((n for name, n in rows if name == SUB), default=0), int(logs[0]), int(logs[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    import pulsar

    with tempfile.TemporaryDirectory() as tmp:
        data, log = Path(tmp) / "data", Path(tmp) / "broker.log"
        proc, url, admin = start(data, log)
        out: dict[str, object] = {"messages": args.messages, "rounds": args.rounds}
        try:
            client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
            props = {"letterbox.backoff.min_ms": "3600000", "letterbox.backoff.max_ms": "3600000",
                     "letterbox.dlq.max_redeliveries": str(args.rounds + 5)}
            consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared, properties=props,
                                        consumer_name="bench-worker", negative_ack_redelivery_delay_ms=10,
                                        receiver_queue_size=1000)
            wait_cpu_quiet(proc.pid)
            out["idle"] = memory_mb(proc.pid)
            producer = client.create_producer(TOPIC, batching_enabled=False, max_pending_messages=5000,
                                              block_if_queue_full=True)
            body = b"x" * 100
            for _ in range(args.messages):
                producer.send_async(body, None)
            producer.flush()
            wait_cpu_quiet(proc.pid)
            out["produced"] = memory_mb(proc.pid)
            rounds = []
            for r in range(1, args.rounds + 1):
                t0 = time.perf_counter()
                for _ in range(args.messages):
                    consumer.negative_acknowledge(consumer.receive(60_000))
                wait_cpu_quiet(proc.pid)
                record, logs, n = stored_bytes(data)
                rounds.append({"round": r, "seconds": round(time.perf_counter() - t0, 1),
                               **{k: round(v, 1) for k, v in memory_mb(proc.pid).items()},
                               "record_mb": round(record / 1e6, 2), "attempt_logs_mb": round(logs / 1e6, 2),
                               "attempt_log_rows": n})
                print(json.dumps(rounds[-1]), flush=True)
                req = urllib.request.Request(f"{admin}/admin/v2/letterbox/clock/advance?ms=7200000", method="POST")
                urllib.request.urlopen(req, timeout=30).read()
            out["rounds_measured"] = rounds
            client.close()
        finally:
            proc.terminate()
            proc.wait(60)
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
