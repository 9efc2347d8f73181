"""Micro-benchmark of the consumer-side frames (issue 13): the pure-Python path the broker took
before the compiled letterbox.protocol._consumer_codec, against the compiled one, in one process.
Prints min of --reps repetitions of --calls calls, in microseconds per call (per message / per
receipt / per acked id as named).

    PYTHONPATH=src .venv/bin/python benchmarks/consumer_codec_micro.py --reps 40
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from operator import itemgetter

from letterbox.protocol import framing, pb, receipts, speedups
from letterbox.protocol.ack_decoder import decode_ack_py

DATA = bytes(range(256))[:150]  # a stored entry: checksum, metadata and a 100-byte payload


def best(fn: Callable[[], object], calls: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append(time.perf_counter() - t0)
    return min(times) / calls * 1e6


def ack_raw(n: int, ack_set: bool = False) -> bytes:
    ids = [pb.MessageIdData(ledgerId=3, entryId=100_000 + i, ack_set=[0x1F0] if ack_set else None)
           for i in range(n)]
    cmd = pb.BaseCommand(type=pb.BaseCommand.ACK, ack=pb.CommandAck(consumer_id=1, ack_type=0, message_id=ids))
    return cmd.SerializeToString()


def old_ack(raw: bytes) -> object:
    """What handle_ack did per frame: protobuf parse, then ids split by ack set."""
    c = framing._parse_command(raw).ack
    items, plain = [], []
    for m in c.message_id:
        if m.ledgerId == 3:
            acks = m.ack_set
            if acks:
                items.append((m.entryId, list(acks)))
            else:
                plain.append(m.entryId)
    return c.consumer_id, c.ack_type, c.HasField("request_id"), items, plain


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--calls", type=int, default=1000)
    a = ap.parse_args()
    c = speedups.consumer_codec
    assert c is not None, "build the extension: python setup.py build_ext --inplace"
    enc = receipts.MessageEncoder(7, 3, -1)
    rows: list[tuple[str, float, float]] = []
    eid = 123_456
    rows.append(("MESSAGE frame, per message", best(lambda: enc.frame(eid, 0, None, DATA), a.calls, a.reps),
                 best(lambda: c.message_frame(7, 3, eid, -1, 0, None, DATA), a.calls, a.reps)))
    rows.append(("MESSAGE frame, redelivered + ack set", best(lambda: enc.frame(eid, 2, [0x1F0], DATA), a.calls, a.reps),
                 best(lambda: c.message_frame(7, 3, eid, -1, 2, [0x1F0], DATA), a.calls, a.reps)))
    run = [(3, eid + i, 0, 1, len(DATA), DATA) for i in range(100)]  # storage/cache.Row
    eids = [r[1] for r in run]
    data_of = itemgetter(5)

    def old_run() -> int:  # dispatch_runs.send_plain_run's frames, then the dispatcher's join
        frame = enc.frame
        frames = [frame(r[1], 0, None, r[5]) for r in run]
        return len(b"".join(frames)) + sum(map(len, frames))

    def new_run() -> int:
        frames = [c.message_frames(7, 3, -1, eids, list(map(data_of, run)))]
        return len(b"".join(frames)) + sum(map(len, frames))

    rows.append(("MESSAGE frames of a plain run of 100 (+ the join), per entry",
                 best(old_run, a.calls // 10, a.reps) / 100, best(new_run, a.calls // 10, a.reps) / 100))
    for n in (1, 20):
        pending = [(eid + i, 1000 + i, None, 150) for i in range(n)]
        old = best(lambda p=pending: receipts.send_receipts(5, 3, [(s, e, h) for e, s, h, _n in p]), a.calls, a.reps) / n
        new = best(lambda p=pending: c.pending_receipts(5, 3, p), a.calls, a.reps) / n
        rows.append((f"SEND_RECEIPTs of a pass of {n}, per receipt", old, new))
    for n, ack_set in ((1, False), (20, False), (20, True)):
        raw = ack_raw(n, ack_set)
        old = best(lambda r=raw: old_ack(r), a.calls, a.reps) / n
        new = best(lambda r=raw: c.decode_ack(r), a.calls, a.reps) / n
        py = best(lambda r=raw: decode_ack_py(r), a.calls, a.reps) / n
        rows.append((f"ACK of {n} id(s){' with ack sets' if ack_set else ''}, per id (pure-Python decoder {py:.3f})",
                     old, new))
    print(f"min of {a.reps} x {a.calls} calls, us per unit")
    print(f"{'what':<75} {'python':>8} {'C':>8}")
    for name, old, new in rows:
        print(f"{name:<75} {old:8.3f} {new:8.3f}")


if __name__ == "__main__":
    main()
