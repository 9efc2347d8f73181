"""Redrive cost: a plain redrive (back to REAL_TOPIC) against a subscription-only redrive
(back into the one subscription, acked on the others in the same transaction), and a
background task's throughput, on one broker.

    .venv/bin/python benchmarks/redrive_subscription.py --messages 20000 --subscriptions 3

For each mode a fresh topic gets --subscriptions subscriptions and --messages dead letters
of S1 in <topic>-S1-DLQ (produced there with a broker dead-letter move's stamps). Then the DLQ is redriven in ONE admin call (the
broker's chunks of up to 1,000) and timed; the script checks afterwards that S1 holds every
message again and (subscription-only) that the other subscriptions' backlogs did not move.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pulsar
from _broker import Broker

P = "/admin/v2/persistent/public/default"


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def backlog(base: str, topic: str, sub: str) -> int:
    return int(call(base, "GET", f"{P}/{topic}/stats")[1]["subscriptions"][sub]["msgBacklog"])


def prepare(base: str, url: str, topic: str, n: int, subs: int) -> None:
    """--subscriptions subscriptions on `topic` and n dead letters of S1 in <topic>-S1-DLQ
    (produced there with the stamps a broker-side dead-letter move writes)."""
    call(base, "PUT", f"{P}/{topic}")
    for i in range(1, subs + 1):
        call(base, "PUT", f"{P}/{topic}/subscription/S{i}", "earliest")
    client = pulsar.Client(url)
    real = f"persistent://public/default/{topic}"
    producer = client.create_producer(f"{real}-S1-DLQ", batching_enabled=False, max_pending_messages=2000,
                                      block_if_queue_full=True)
    done: list[Any] = []
    for i in range(n):
        producer.send_async(f"m{i}".encode(), lambda res, _mid: done.append(res), partition_key=f"k{i % 100}", properties={
            "REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": f"1:{i}:-1:-1", "DEAD_LETTER_REASON": "expired",
            "DEAD_LETTER_SUBSCRIPTION": "S1", "DEAD_LETTER_TIME": str(int(time.time() * 1000))})
    producer.flush()
    deadline = time.monotonic() + 300
    while len(done) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(done) == n and all(r == pulsar.Result.Ok for r in done), "not every dead letter was stored"
    client.close()


def run(base: str, url: str, mode: str, n: int, subs: int) -> dict[str, Any]:
    topic = f"bench-{mode}"
    prepare(base, url, topic, n, subs)
    others = {f"S{i}": backlog(base, topic, f"S{i}") for i in range(2, subs + 1)}
    body: dict[str, Any] = {"subscriptionOnly": True} if mode != "plain" else {}
    t0 = time.perf_counter()
    if mode == "task":
        status, task = call(base, "POST", f"{P}/{topic}-S1-DLQ/letterbox/redrive", {**body, "background": True})
        assert status == 202, task
        while True:
            task = call(base, "GET", f"{P}/{topic}-S1-DLQ/letterbox/redrive/{task['taskId']}")[1]
            if task["state"] != "running":
                break
            time.sleep(0.05)
        moved = task["moved"]
    else:
        status, result = call(base, "POST", f"{P}/{topic}-S1-DLQ/letterbox/redrive", body)
        assert status == 200, result
        moved = result["moved"]
    seconds = time.perf_counter() - t0
    assert moved == n, (mode, moved, locals().get("result") or locals().get("task"))
    assert backlog(base, topic, "S1") == n
    after = {s: backlog(base, topic, s) for s in others}
    if mode != "plain":
        assert after == others, (others, after)
    return {"mode": mode, "messages": n, "seconds": round(seconds, 2), "msg_per_s": round(n / seconds),
            "other_subscriptions_backlog_grew_by": sum(after.values()) - sum(others.values())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--subscriptions", type=int, default=3)
    ap.add_argument("--sync", default="full", choices=("full", "normal", "off"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lb-redrive-"))
    try:
        with Broker(tmp / "data", sync=args.sync).start() as broker:
            base = broker.admin_url()
            rows = [run(base, broker.url, mode, args.messages, args.subscriptions)
                    for mode in ("plain", "subscription-only", "task")]
        print(f"| mode | messages | seconds | msg/s | other subscriptions' backlog grew by "
              f"({args.subscriptions - 1} others) |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['mode']} | {r['messages']} | {r['seconds']} | {r['msg_per_s']} | "
                  f"{r['other_subscriptions_backlog_grew_by']} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
