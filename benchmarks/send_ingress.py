"""Micro-benchmark of the SEND ingress path (issue 13): 1,000 SEND frames through the frame
decoder plus the parse and check that handle_send does before publishing, with the compiled
codec (_send_codec.decode_send: a Frame with facts per SEND; _send_codec.split_sends: the run of
SENDs in the buffer as tuples, FrameDecoder.take_sends) and with the Python/protobuf path, in one
process.
Prints the minimum over the repetitions, in microseconds per SEND.

    python benchmarks/send_ingress.py [--reps 40] [--batch 0] [--frames 1000]
"""
from __future__ import annotations

import argparse
import struct
import time

from letterbox.protocol import framing, pb
from letterbox.protocol.batch import build_batch_payload
from letterbox.protocol.framing import FrameDecoder, build_headers_and_payload, parse_send_payload
from letterbox.protocol.message_check import check_message, needs_expanding

MAX = 5 * 1024 * 1024
OFF_LOOP_BYTES = 256 * 1024
N = 1000


def frames(batch: int) -> bytes:
    out = []
    for seq in range(N):
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
        cmd.send.producer_id, cmd.send.sequence_id = 0, seq
        meta = pb.MessageMetadata(producer_name="standalone-ty6mtexe-0", sequence_id=seq,
                                  publish_time=1_795_485_980_845 + seq)
        if batch:
            cmd.send.num_messages = batch
            meta.num_messages_in_batch = batch
            entries = [(pb.SingleMessageMetadata(sequence_id=seq * batch + i), b"x" * 100) for i in range(batch)]
            payload = build_batch_payload(entries)
            meta.uncompressed_size = len(payload)
        else:
            payload = b"x" * 100
        raw = cmd.SerializeToString()
        hp = build_headers_and_payload(meta, payload)
        out.append(struct.pack(">II", 4 + len(raw) + len(hp), len(raw)) + raw + hp)
    return b"".join(out)


def python_path(data: bytes) -> int:
    dec = FrameDecoder()
    dec.feed(data)
    total = 0
    while (frame := dec.next_frame()) is not None:
        c, hp = frame.send, frame.headers_and_payload
        assert c is not None and hp is not None
        meta, payload, ok = parse_send_payload(hp)
        assert ok and len(payload) <= MAX and needs_expanding(meta) <= OFF_LOOP_BYTES
        total += check_message(c.num_messages, meta, payload, MAX)
        _ = meta.publish_time, meta.deliver_at_time if meta.HasField("deliver_at_time") else None
    return total


def compiled_path(data: bytes) -> int:
    dec = FrameDecoder()
    dec.feed(data)
    total = 0
    while (frame := dec.next_frame()) is not None:
        facts = frame.facts
        assert facts is not None and facts[3] <= MAX
        total += facts[0]
        _ = facts[1], facts[2]
    return total


def compiled_runs(data: bytes) -> int:
    dec = FrameDecoder()
    dec.feed(data)
    total = 0
    for _pid, _seq, _num, _highest, _cmd, _hp, facts in dec.take_sends():
        assert facts is not None and facts[3] <= MAX
        total += facts[0]
        _ = facts[1], facts[2]
    assert dec.next_frame() is None
    return total


def best(fn: object, data: bytes, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(data)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times) / N * 1e6


def main() -> None:
    global N
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=0, help="messages per SEND (0: unbatched)")
    ap.add_argument("--frames", type=int, default=N, help="SEND frames per repetition")
    args = ap.parse_args()
    N = args.frames
    data = frames(args.batch)
    codec = framing._decode_send
    assert codec is not None, "the compiled codec is not built (make codecs)"
    assert compiled_path(data) == (args.batch or 1) * N
    framing._decode_send = None
    try:
        old = best(python_path, data, args.reps)
    finally:
        framing._decode_send = codec
    assert compiled_runs(data) == (args.batch or 1) * N
    new = best(compiled_path, data, args.reps)
    runs = best(compiled_runs, data, args.reps)
    print(f"batch={args.batch}, {N} SENDs: python/protobuf path {old:.2f} us/SEND; compiled, a Frame per SEND "
          f"{new:.2f} ({(1 - new / old) * 100:.0f} % less); compiled, runs (take_sends) {runs:.2f} "
          f"({(1 - runs / old) * 100:.0f} % less); min of {args.reps} x {N}")


if __name__ == "__main__":
    main()
