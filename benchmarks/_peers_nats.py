"""peers.py's NATS JetStream workers (`nats-py`), one process each:

    python _peers_nats.py produce URL STREAM N SIZE [--failing]
    python _peers_nats.py consume URL STREAM N [--failing]

The stream STREAM (file storage, subject `<STREAM>.m`) is created by the consumer, with its
durable pull consumer "work" (explicit ack; max_deliver=4 with --failing) and, with --failing,
a dead letter stream `<STREAM>DLQ` (subject `<STREAM>.dlq`).
produce: js.publish_async with publish_async_max_pending=1000 (1,000 in flight), every PubAck
future checked, then publish_async_completed(); prints "DONE {t_start, t_end, cpu_s, ok, errors}".
consume: pull fetch(1000) + ack() per message; with --failing every 10th message gets nak()
every time; JetStream stops delivering it after 4 deliveries and publishes the
MAX_DELIVERIES advisory, from which the dead letter is rebuilt: the message is read back from
the stream by its sequence (get_msg) and published to the dead letter stream (awaiting its
PubAck). READY / DONE / RESULT lines as in _peers_pulsar.py.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import nats
from _peers_common import SUBSCRIPTION, Tally, cpu_now, payload, say
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from nats.js.errors import APIError

MAX_DELIVER = 4


async def produce(a: argparse.Namespace) -> None:
    nc = await nats.connect(a.url)
    js = nc.jetstream(publish_async_max_pending=1000)
    outcome = {"ok": 0, "errors": 0}

    def acked(fut: asyncio.Future[object]) -> None:
        ok = not fut.cancelled() and fut.exception() is None
        outcome["ok" if ok else "errors"] += 1

    subject = f"{a.stream}.m"
    body = [payload(i, a.failing, a.size) for i in range(a.n)]
    t_start, cpu0 = time.time(), cpu_now()
    for data in body:
        fut = await js.publish_async(subject, data)
        fut.add_done_callback(acked)
    await js.publish_async_completed()
    await asyncio.sleep(0)  # let the last done-callbacks run
    t_end, cpu = time.time(), cpu_now() - cpu0
    say("DONE", {"t_start": t_start, "t_end": t_end, "cpu_s": round(cpu, 3), **outcome})
    await nc.close()


async def consume(a: argparse.Namespace) -> None:
    nc = await nats.connect(a.url)
    js = nc.jetstream()
    stream, dlq_stream = a.stream, f"{a.stream}DLQ"
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.m"], storage=StorageType.FILE))
    if a.failing:
        await js.add_stream(StreamConfig(name=dlq_stream, subjects=[f"{stream}.dlq"], storage=StorageType.FILE))
    config = ConsumerConfig(durable_name=SUBSCRIPTION, ack_policy=AckPolicy.EXPLICIT, ack_wait=30,
                            max_deliver=MAX_DELIVER if a.failing else -1)
    psub = await js.pull_subscribe(f"{stream}.m", durable=SUBSCRIPTION, stream=stream, config=config)
    tally = Tally(a.n, a.failing)

    async def on_advisory(msg: nats.aio.msg.Msg) -> None:
        seq = json.loads(msg.data)["stream_seq"]
        original = await js.get_msg(stream, seq)
        assert original.data is not None
        await js.publish(f"{stream}.dlq", original.data)
        tally.on_dead_letter(original.data)
        if tally.complete:
            tally.stop_clock()

    if a.failing:
        await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{SUBSCRIPTION}", cb=on_advisory)
        await nc.flush()
    tally.t_start, tally.cpu_start = time.time(), cpu_now()
    say("READY")
    idle_deadline = time.monotonic() + a.timeout
    drain_until: float | None = None
    while True:
        now = time.monotonic()
        if drain_until is None and tally.t_done is not None:
            drain_until = now + a.drain
        if (drain_until is not None and now >= drain_until) or now > idle_deadline:
            break
        try:
            msgs = await psub.fetch(1000, timeout=0.2)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        except APIError:
            continue
        idle_deadline = time.monotonic() + a.timeout
        for msg in msgs:
            data = msg.data
            tally.deliveries += 1
            if data[10] == ord("P"):
                await msg.nak(delay=a.nak_delay_ms / 1000 if a.nak_delay_ms else None)
                tally.nacks += 1
                continue
            await msg.ack()
            tally.on_ack(int(data[:10]))
            if tally.complete:
                tally.stop_clock()
    say("RESULT", tally.result())
    await nc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=["produce", "consume"])
    ap.add_argument("url")
    ap.add_argument("stream")
    ap.add_argument("n", type=int)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batching", choices=["on", "off"], default="off", help="ignored (NATS has no batching)")
    ap.add_argument("--failing", action="store_true", help="every 10th message always fails")
    ap.add_argument("--dlq", default="none", help="ignored (dead letters come from the advisory)")
    ap.add_argument("--nak-delay-ms", type=int, default=0, help="nak(delay=...) (0: plain nak(), redelivered at once)")
    ap.add_argument("--timeout", type=float, default=60, help="give up after this long without a message")
    ap.add_argument("--drain", type=float, default=1.0, help="seconds to go on counting duplicates")
    a = ap.parse_args()
    asyncio.run(produce(a) if a.role == "produce" else consume(a))


if __name__ == "__main__":
    main()
