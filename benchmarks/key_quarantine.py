"""Ordered quarantine: what `letterbox.dlq.on_key_failure = park` costs a healthy subscription.

    .venv/bin/python benchmarks/key_quarantine.py --messages 3000 --keys 1 10 100

For each key count K, M 100-byte messages (batching off, keys round-robin) are produced to a
fresh topic, then one official-client Failover consumer receives and acknowledges them all
(nothing fails), once with the default policy (`continue`) and once with `park`, each on its
own topic and subscription (subscribed before the first send). Reported: messages per
second from the first send to the last acknowledgement, and the ratio. With park a key has one message out at a
time, and the official clients send acknowledgements in groups every 100 ms, so a key moves
about 10 messages a second; K keys in parallel move up to K times that.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

import pulsar
from _broker import Broker

PROPS = {"letterbox.dlq.max_redeliveries": "3"}


def consume_rate(url: str, messages: int, keys: int, park: bool) -> float:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    topic = f"persistent://public/default/kq-{uuid.uuid4().hex[:8]}"
    props = {**PROPS, "letterbox.dlq.on_key_failure": "park" if park else "continue"}
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover, properties=props,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    started = time.perf_counter()
    for i in range(messages):
        producer.send_async(b"x" * 100, None, partition_key=f"k{i % keys}")
    producer.flush()
    for _ in range(messages):
        consumer.acknowledge(consumer.receive(60_000))
    elapsed = time.perf_counter() - started
    client.close()
    return messages / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--keys", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "data").start()
        try:
            for keys in args.keys:
                cont = consume_rate(broker.url, args.messages, keys, park=False)
                park = consume_rate(broker.url, args.messages, keys, park=True)
                rows.append({"keys": keys, "messages": args.messages, "continue_msg_s": round(cont),
                             "park_msg_s": round(park), "park_over_continue": round(park / cont, 3)})
        finally:
            broker.stop()
    if args.json:
        print(json.dumps(rows))
        return
    print("| keys | messages | continue msg/s | park msg/s | park / continue |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['keys']} | {r['messages']} | {r['continue_msg_s']:,} | {r['park_msg_s']:,} | "
              f"{r['park_over_continue']:.3f} |")


if __name__ == "__main__":
    main()
