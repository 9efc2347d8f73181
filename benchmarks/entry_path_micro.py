"""Per-entry Python work of the storage and dispatch hot path, in process (issue 13):
no client, no socket, no disk wait, so the figures are the loop thread's own work per
1,000 entries, for the steps the broker runs once per message.

    PYTHONPATH=src .venv/bin/python benchmarks/entry_path_micro.py [--reps 40] [--json]
    .venv/bin/python benchmarks/entry_path_micro.py --compare OLD_SRC   # old vs new, interleaved

One broker service (its store started; nothing is written: the benchmark calls the
loop-thread halves directly), one topic, one durable subscription with one consumer on a
fake connection (always writable, collects the frames). Each repetition:
  reserve  1,000 rows reserved as one AppendRunOp (append_run.reserve_row, the SEND path)
  commit   that run's commit applied to memory (AppendRunOp.on_commit: the tail cache)
  dispatch one Dispatcher._dispatch round sending those 1,000 entries to the consumer
           (1,000 permits; MESSAGE frames built, pending acks booked)
  ack      Subscription.ack_individual of the 1,000 ids (cursor, pending acks)
Reported: the minimum over --reps repetitions of each step, in microseconds per 1,000
entries. ENTRY_PATH_N sets the entries per repetition (default 1,000), ENTRY_PATH_CACHE_BYTES the
tail cache's size (0: the dispatcher reads every entry back from disk). --compare runs this script alternately on OLD_SRC and on this tree's src, in
separate processes (each its own minimum), --rounds times, and prints both minima.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

N = int(os.environ.get("ENTRY_PATH_N", "1000"))
TOPIC = "persistent://public/default/entry-path-micro"


class FakeCnx:
    def __init__(self, service: Any) -> None:
        self.service = service
        self.writable = True
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)


async def measure(reps: int, sub_type: int, data_dir: Path) -> dict[str, float]:
    from letterbox.broker.service import BrokerService
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.config import BrokerConfig
    from letterbox.protocol import build_headers_and_payload, pb
    from letterbox.storage.append_run import reserve_row
    from letterbox.topic_name import TopicName

    service = BrokerService(BrokerConfig(data_dir=data_dir, port=None, admin_port=None, sync="off"))
    await service.start()
    try:
        disk = bool(os.environ.get("ENTRY_PATH_CACHE_BYTES"))
        if disk:  # e.g. 0: every dispatch reads from disk
            service.store._cache.limit = int(os.environ["ENTRY_PATH_CACHE_BYTES"])
        topic = service.persistent_topic(TopicName.parse(TOPIC), create=True)
        ledger = topic.ledger  # type: ignore[attr-defined]
        await ledger.append(b"first", 1, 1)  # the ledger's row is stored
        sub = topic.subscription_for("s", True, "latest", None)  # type: ignore[attr-defined]
        cnx: Any = FakeCnx(service)
        consumer = Consumer(cnx, consumer_id=1, name="c", sub_type=sub_type)
        sub.add_consumer(consumer)
        await asyncio.sleep(0)
        meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1_700_000_000_000)
        data = build_headers_and_payload(meta, b"x" * 100)
        best = {"reserve": 1e9, "commit": 1e9, "dispatch": 1e9, "ack": 1e9}
        clock = time.perf_counter
        for rep in range(reps):
            ops: list[Any] = []
            t0 = clock()
            for i in range(N):
                reserve_row(ledger, ops, data, 1, 1_700_000_000_000, "p", rep * N + i, None)
            t1 = clock()
            if disk:  # stored for real (the commit figure then includes the writer's round trip)
                await ledger.submit_appends(ops)
            else:
                for op in ops:
                    op.on_commit()
            t2 = clock()
            written = cnx.written
            first = ledger.last_confirmed.entry_id - N + 1
            consumer.permits += N
            sub.dispatcher._dispatch()
            t3 = clock()
            ids = list(range(first, first + N))
            sub.ack_individual(consumer, [], ids)
            t4 = clock()
            if cnx.written - written < N * len(data) or len(consumer.pending) \
                    or sub.cursor.mark_delete.entry_id != first + N - 1:
                raise SystemExit("the round did not dispatch and ack every entry")
            for k, v in (("reserve", t1 - t0), ("commit", t2 - t1), ("dispatch", t3 - t2), ("ack", t4 - t3)):
                best[k] = min(best[k], v)
            if rep % 8 == 7:
                await asyncio.sleep(0)  # let the cursor writes and trims run between reps
        return {k: round(v * 1e6, 1) for k, v in best.items()}
    finally:
        await service.stop()


def run_here(reps: int, sub_type: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="entry-path-"))
    try:
        return asyncio.run(measure(reps, sub_type, tmp / "data"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_tree(src: str, reps: int, sub_type: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, __file__, "--reps", str(reps), "--sub-type", str(sub_type), "--json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--sub-type", type=int, default=1, help="0 Exclusive, 1 Shared (default), 2 Failover")
    ap.add_argument("--compare", metavar="OLD_SRC", help="also run on another tree's src (old vs new)")
    ap.add_argument("--rounds", type=int, default=3, help="--compare: alternations")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.compare:
        r = run_here(a.reps, a.sub_type)
        print(json.dumps(r) if a.json else "  ".join(f"{k} {v} us/1000" for k, v in r.items()))
        return
    new_src = str(Path(__file__).resolve().parents[1] / "src")
    old: dict[str, float] = {}
    new: dict[str, float] = {}
    for _ in range(a.rounds):
        for tree, acc in ((a.compare, old), (new_src, new)):
            r = run_tree(tree, a.reps, a.sub_type)
            for k, v in r.items():
                acc[k] = min(acc.get(k, 1e9), v)
    print("| step (us per 1,000 entries) | old | new | new / old |")
    print("|---|---:|---:|---:|")
    for k in old:
        print(f"| {k} | {old[k]} | {new[k]} | {new[k] / old[k]:.2f} |")
    print(f"| total | {sum(old.values()):.1f} | {sum(new.values()):.1f} | {sum(new.values()) / sum(old.values()):.2f} |")


if __name__ == "__main__":
    main()
