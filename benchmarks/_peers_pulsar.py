"""peers.py's Pulsar-protocol workers (official `pulsar-client` against letterbox), one process each:

    python _peers_pulsar.py produce URL TOPIC N SIZE --batching on|off [--failing]
    python _peers_pulsar.py consume URL TOPIC N --dlq none|client|broker [--failing]

produce: max_pending_messages=1000, block_if_queue_full=True, send_async with every callback
checked, then flush(); prints "DONE {t_start, t_end, cpu_s, ok, errors}".
Both roles keep the interpreter's GIL switch interval (5 ms): at 0.5 ms the client's sending
thread and its I/O thread's callbacks traded the GIL so often that the producer spent 35-50 %
more CPU per message and sent 15-30 % fewer a second, against Apache Pulsar and letterbox alike
(benchmarks/NOTES.md).
consume: Shared subscription "work", receive() + acknowledge() per message; with --failing
every 10th message is negative_acknowledge()d every time (negative_ack_redelivery_delay_ms=100)
and dead-lettered after 4 deliveries, by the client (ConsumerDeadLetterPolicy(max_redeliver_count=3))
or by the broker (consumer property letterbox.dlq.max_redeliveries=3); a second consumer on
`<topic>-work-DLQ`, subscribed before the run, counts the dead letters. Prints READY once
subscribed, DONE when every good message is acked and every poison one dead-lettered (each
once), then drains for --drain seconds to count late duplicates and prints "RESULT {...}".
"""
from __future__ import annotations

import argparse
import threading
import time

import pulsar
from _peers_common import SUBSCRIPTION, Tally, cpu_now, payload, say

MAX_REDELIVERIES = 3
NACK_DELAY_MS = 100
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def produce(a: argparse.Namespace) -> None:
    client = pulsar.Client(a.url, operation_timeout_seconds=30, logger=LOGGER)
    producer = client.create_producer(
        a.topic, batching_enabled=a.batching == "on", max_pending_messages=1000,
        block_if_queue_full=True, send_timeout_millis=60_000,
    )
    outcome = {"ok": 0, "errors": 0}
    lock = threading.Lock()

    def sent(res: pulsar.Result, _msg_id: object) -> None:
        with lock:
            outcome["ok" if res == pulsar.Result.Ok else "errors"] += 1

    body = [payload(i, a.failing, a.size) for i in range(a.n)]
    t_start, cpu0 = time.time(), cpu_now()
    send = producer.send_async
    for data in body:
        send(data, sent)
    producer.flush()
    t_end, cpu = time.time(), cpu_now() - cpu0
    say("DONE", {"t_start": t_start, "t_end": t_end, "cpu_s": round(cpu, 3), **outcome})
    producer.close()
    client.close()


class DlqCounter(threading.Thread):
    def __init__(self, client: pulsar.Client, topic: str, tally: list[Tally], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        # a durable subscription created before the run (see failure_path.py: a live Reader
        # on a DLQ topic sometimes stopped receiving)
        self.consumer = client.subscribe(topic, "peers-count", consumer_type=pulsar.ConsumerType.Exclusive,
                                         initial_position=pulsar.InitialPosition.Earliest,
                                         receiver_queue_size=10_000)
        self.tally, self.lock = tally, lock
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                msg = self.consumer.receive(100)
            except pulsar.Timeout:
                continue
            self.consumer.acknowledge(msg)
            with self.lock:
                t = self.tally[0]
                t.on_dead_letter(msg.data())
                if t.complete:
                    t.stop_clock()


def consume(a: argparse.Namespace) -> None:
    client = pulsar.Client(a.url, operation_timeout_seconds=30, logger=LOGGER)
    kwargs: dict[str, object] = {}
    if a.dlq == "client":
        kwargs["dead_letter_policy"] = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=MAX_REDELIVERIES)
    elif a.dlq == "broker":
        kwargs["properties"] = {"letterbox.dlq.max_redeliveries": str(MAX_REDELIVERIES)}
    lock = threading.Lock()
    holder: list[Tally] = []
    counter = DlqCounter(client, f"{a.topic}-{SUBSCRIPTION}-DLQ", holder, lock) if a.dlq != "none" else None
    consumer = client.subscribe(
        a.topic, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
        **kwargs,
    )
    tally = Tally(a.n, a.failing)
    holder.append(tally)
    if counter is not None:
        counter.start()
    say("READY")
    receive, ack, nack = consumer.receive, consumer.acknowledge, consumer.negative_acknowledge
    idle_deadline = time.monotonic() + a.timeout
    drain_until: float | None = None
    while True:
        now = time.monotonic()
        if drain_until is None and tally.t_done is not None:
            drain_until = now + a.drain
        if (drain_until is not None and now >= drain_until) or now > idle_deadline:
            break
        try:
            msg = receive(100)
        except pulsar.Timeout:
            continue
        idle_deadline = time.monotonic() + a.timeout
        data = msg.data()
        i = int(data[:10])
        with lock:
            tally.deliveries += 1
            if data[10] == ord("P"):
                nack(msg)
                tally.nacks += 1
                continue
            ack(msg)
            tally.on_ack(i)
            if tally.complete:
                tally.stop_clock()
    if counter is not None:
        counter.stop.set()
        counter.join()
    say("RESULT", tally.result())
    consumer.close()
    client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=["produce", "consume"])
    ap.add_argument("url")
    ap.add_argument("topic")
    ap.add_argument("n", type=int)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batching", choices=["on", "off"], default="off")
    ap.add_argument("--failing", action="store_true", help="every 10th message always fails")
    ap.add_argument("--dlq", choices=["none", "client", "broker"], default="none")
    ap.add_argument("--timeout", type=float, default=60, help="give up after this long without a message")
    ap.add_argument("--drain", type=float, default=1.0, help="seconds to go on counting duplicates")
    a = ap.parse_args()
    (produce if a.role == "produce" else consume)(a)


if __name__ == "__main__":
    main()
