"""Broker CPU per redelivery and per dead-letter move, in process: no client, no sockets,
so the figure is the failure path's own work (issue 13 item 4), without the frame parsing,
dispatch and client noise of failure_path.py / peers.py W2.

    PYTHONPATH=src .venv/bin/python benchmarks/failure_ops.py --poison 2000 --round 50 --runs 3

One broker service (its store, writer thread and group commit, --sync full) in this process,
one topic of --messages 100-byte entries, one durable Shared subscription with the
broker-side dead letter policy (letterbox.dlq.max_redeliveries=3). Every 10th entry is
poison, the others are acknowledged first (so the cursor holds one ack range per poison
entry, as in W2). Then, like the official client's nack timer, the poison entries come back
in requests of --round ids, each request settled (record durable, moves committed) before
the next: rounds 1-3 redeliver every poison entry (count 1, 2, 3), round 4 dead-letters
them (count 4 > 3: one move transaction per request). Each entry is marked delivered before
each request (the dispatcher's on_send).

  per redelivery = process CPU of rounds 1-3 / (3 x poison)
  per move       = process CPU of round 4 / poison - per redelivery
                   (the request's decision is the same work as a redelivery's)

Process CPU covers the event loop and the writer thread (SQLite, fsync calls).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from letterbox import failure
from letterbox.broker.service import BrokerService
from letterbox.config import BrokerConfig
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.topic_name import TopicName

TOPIC = "persistent://public/default/failure-ops"


def entry(i: int, size: int) -> bytes:
    meta = pb.MessageMetadata(producer_name="failure-ops", sequence_id=i, publish_time=1_700_000_000_000 + i)
    head = b"%010d" % i + (b"P" if i % 10 == 9 else b"G")
    return build_headers_and_payload(meta, head + b"x" * max(0, size - len(head)))


async def settle(service: BrokerService) -> None:
    while service._tasks:  # the tracker's settle tasks (record write, move transaction)
        await asyncio.gather(*list(service._tasks))


async def one_run(messages: int, round_size: int, size: int, data_dir: Path) -> dict[str, float]:
    cfg = BrokerConfig(data_dir=data_dir, port=None, admin_port=None, sync="full")
    service = BrokerService(cfg)
    await service.start()
    try:
        topic = service.persistent_topic(TopicName.parse(TOPIC), create=True)
        ledger = topic.ledger  # type: ignore[attr-defined]
        now = service.clock.now_ms()
        await asyncio.gather(*[ledger.append(entry(i, size), 1, now) for i in range(messages)])
        sub = topic.subscription_for("work", True, "earliest", None)  # type: ignore[attr-defined]
        sub.sub_type = failure.SubscriptionType.SHARED
        sub.policy = failure.policy_from_consumer_properties({"letterbox.dlq.max_redeliveries": "3"})
        first = ledger.first_position.entry_id
        ids = list(range(first, first + messages))
        sub.cursor.ack([e for i, e in enumerate(ids) if i % 10 != 9])
        await sub.cursor.flush()
        poison = [e for i, e in enumerate(ids) if i % 10 == 9]
        tracker = sub.tracker
        cpu: list[float] = []
        wall: list[float] = []
        for _round in range(4):
            c0, w0 = time.process_time(), time.perf_counter()
            for k in range(0, len(poison), round_size):
                chunk = poison[k:k + round_size]
                for e in chunk:
                    tracker.on_send(e)
                tracker.redeliver(chunk, failure.Nack(), None)
                await settle(service)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        dead = service.persistent_topic(TopicName.parse(f"{TOPIC}-work-DLQ"), create=False)
        moved = dead.ledger.last_confirmed.entry_id + 1 if dead is not None else 0  # type: ignore[attr-defined]
        if moved != len(poison) or any(not sub.cursor.is_acked(e) for e in poison):
            raise SystemExit(f"expected {len(poison)} dead letters, found {moved}")
        p = len(poison)
        per_redelivery = sum(cpu[:3]) / (3 * p)
        return {"per_redelivery_us": round(per_redelivery * 1e6, 1),
                "per_move_us": round((cpu[3] / p - per_redelivery) * 1e6, 1),
                "redelivery_rounds_cpu_s": round(sum(cpu[:3]), 3), "move_round_cpu_s": round(cpu[3], 3),
                "rounds_wall_s": [round(w, 3) for w in wall], "dead_letters": moved,
                "loadavg_1m": round(os.getloadavg()[0], 2)}
    finally:
        await service.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--poison", type=int, default=2000, help="poison entries (one in 10 of the topic)")
    ap.add_argument("--round", type=int, default=50, help="ids per redelivery request")
    ap.add_argument("--size", type=int, default=100, help="payload bytes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print every run as JSON")
    a = ap.parse_args()
    runs = []
    for _ in range(a.runs):
        tmp = Path(tempfile.mkdtemp(prefix="failure-ops-"))
        try:
            r = asyncio.run(one_run(a.poison * 10, a.round, a.size, tmp / "data"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        runs.append(r)
        if not a.json:
            print(f"  per redelivery {r['per_redelivery_us']:>6} us  per move {r['per_move_us']:>6} us  "
                  f"(rounds wall {r['rounds_wall_s']} s, load {r['loadavg_1m']})", flush=True)
    med = {k: statistics.median(float(r[k]) for r in runs) for k in ("per_redelivery_us", "per_move_us")}  # type: ignore[arg-type]
    if a.json:
        print(json.dumps({"median": med, "runs": runs}))
    else:
        print(f"median of {len(runs)}: per redelivery {med['per_redelivery_us']} us, per move {med['per_move_us']} us")


if __name__ == "__main__":
    sys.exit(main())
