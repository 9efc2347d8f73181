"""Failure-path cost: N messages, a fraction of them always nacked until they are
dead-lettered, one Shared consumer; compared with the happy path in the same run.

    .venv/bin/python benchmarks/failure_path.py --messages 100000 --fail-ratio 0.1 \\
        --max-redeliveries 3 --mode broker --nack-delay-ms 100

One broker (benchmarks/_broker.py), three fresh topics, the same consumer code for each:

  happy-plain   all messages good, consumer without dead-letter configuration and without
                batch_index_ack_enabled (the fast configuration; for reference)
  happy         all messages good, consumer with the dead-letter configuration of --mode
  failure       every 1/fail-ratio-th message is "poison" (marked in the payload); the
                consumer acks good messages and negative_acknowledge()s poison every time

--mode broker: consumer properties {"letterbox.dlq.max_redeliveries": N}, the broker
moves the message to `<topic>-<sub>-DLQ` (atomically with the ack).
--mode client: the official client's dead_letter_policy=ConsumerDeadLetterPolicy(N).

Messages are produced first (batching on, flush), then the clock runs from the moment
subscribe() returns until every good message has been acked (once; the consumer dedups by
index) and a reader thread on the DLQ topic has seen every poison message. The consumer
uses batch_index_ack_enabled=True in "happy" and "failure": with batching on, an entry that
holds both good and poison messages is otherwise never acked and would be dead-lettered
whole, good messages included.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pulsar
from _broker import Broker, cpu_seconds

GIL_SWITCH_INTERVAL = 0.0005  # as letterbox.cli.perf
SUBSCRIPTION = "work"
POISON = ord("P")
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


def poison_at(i: int, ratio: float) -> bool:
    """Exactly floor(n * ratio) of the first n indexes, evenly spread (every 10th at 0.1)."""
    return int((i + 1) * ratio) != int(i * ratio)


def payload(i: int, poison: bool, size: int) -> bytes:
    head = b"%010d" % i + (b"P" if poison else b"G")
    return head + b"x" * max(0, size - len(head))


def produce(url: str, topic: str, n: int, ratio: float, size: int, batching: bool = True) -> float:
    client = pulsar.Client(url, operation_timeout_seconds=30, io_threads=1, logger=LOGGER)
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=256 * 1024, batching_max_publish_delay_ms=5,
        max_pending_messages=10_000, block_if_queue_full=True, send_timeout_millis=60_000,
    )
    t0 = time.perf_counter()
    send = producer.send_async
    for i in range(n):
        send(payload(i, poison_at(i, ratio), size), None)
    producer.flush()
    seconds = time.perf_counter() - t0
    producer.close()
    client.close()
    return seconds


class DlqReader(threading.Thread):
    """Counts arrivals on the DLQ topic; sets `done` once every poison message is there."""

    def __init__(self, client: pulsar.Client, topic: str, expected: int, t0_ref: list[float]) -> None:
        super().__init__(daemon=True)
        # A durable subscription, not a Reader: in trials a live Reader on the DLQ topic
        # sometimes stopped receiving after the first dead-letter append (a fresh Reader
        # then saw every message), which left the run waiting forever.
        self.counter = client.subscribe(topic, "fp-count", consumer_type=pulsar.ConsumerType.Exclusive,
                                        initial_position=pulsar.InitialPosition.Earliest,
                                        receiver_queue_size=10_000)
        self.expected = expected
        self.t0_ref = t0_ref
        self.arrived: dict[int, float] = {}  # poison index -> seconds since t0
        self.good = 0  # good messages that ended up in the DLQ (should stay 0)
        self.duplicates = 0
        self.done = threading.Event()
        self.stop = threading.Event()
        if expected == 0:
            self.done.set()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                msg = self.counter.receive(100)
            except pulsar.Timeout:
                continue
            self.counter.acknowledge(msg)
            data = msg.data()
            idx = int(data[:10])
            if data[10] != POISON:
                self.good += 1
            elif idx in self.arrived:
                self.duplicates += 1
            else:
                self.arrived[idx] = time.perf_counter() - self.t0_ref[0]
                if len(self.arrived) >= self.expected:
                    self.done.set()


def consume(url: str, topic: str, n: int, ratio: float, policy: str, max_redeliveries: int,
            nack_delay_ms: int, timeout: float, broker_pid: int) -> dict[str, object]:
    """policy: "none" | "broker" | "client". Returns timings and counts."""
    poison_total = sum(1 for i in range(n) if poison_at(i, ratio))
    good_total = n - poison_total
    client = pulsar.Client(url, operation_timeout_seconds=30, io_threads=1, logger=LOGGER)
    kwargs: dict[str, object] = {}
    if policy == "broker":
        kwargs["properties"] = {"letterbox.dlq.max_redeliveries": str(max_redeliveries)}
    elif policy == "client":
        kwargs["dead_letter_policy"] = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=max_redeliveries)
    t0_ref = [0.0]
    reader = DlqReader(client, f"{topic}-{SUBSCRIPTION}-DLQ", poison_total, t0_ref)
    cpu_b0, cpu_c0 = cpu_seconds(broker_pid) or 0.0, time.process_time()
    t_sub = time.perf_counter()
    consumer = client.subscribe(
        topic, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10_000,
        initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=nack_delay_ms,
        batch_index_ack_enabled=policy != "none", **kwargs,
    )
    t0 = t0_ref[0] = time.perf_counter()
    reader.start()
    seen = bytearray(n)
    good = deliveries = nacks = dup_good = 0
    t_good = 0.0 if good_total == 0 else None
    first_seen: dict[int, float] = {}  # poison index -> first delivery (s since t0)
    gaps: list[float] = []  # between consecutive deliveries of one poison message
    last_seen: dict[int, float] = {}
    receive, ack, nack = consumer.receive, consumer.acknowledge, consumer.negative_acknowledge
    deadline = t0 + timeout
    while t_good is None or not reader.done.is_set():
        try:
            msg = receive(100)
        except pulsar.Timeout:
            if time.perf_counter() > deadline:
                break
            continue
        deliveries += 1
        data = msg.data()
        idx = int(data[:10])
        if data[10] == POISON:
            nack(msg)
            nacks += 1
            now = time.perf_counter() - t0
            if idx in last_seen:
                gaps.append(now - last_seen[idx])
            else:
                first_seen[idx] = now
            last_seen[idx] = now
        else:
            ack(msg)
            if seen[idx]:
                dup_good += 1
            else:
                seen[idx] = 1
                good += 1
                if good == good_total:
                    t_good = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    cpu_b, cpu_c = (cpu_seconds(broker_pid) or 0.0) - cpu_b0, time.process_time() - cpu_c0
    completed = t_good is not None and reader.done.is_set()
    reader.stop.set()
    reader.join()
    consumer.close()
    client.close()
    to_dlq = sorted(reader.arrived[i] - first_seen[i] for i in reader.arrived if i in first_seen)
    return {
        "completed": completed, "seconds": round(seconds, 3), "msgs_per_sec": round(n / seconds),
        "subscribe_s": round(t0 - t_sub, 3),
        "all_good_acked_at_s": None if t_good is None else round(t_good, 3),
        "last_dead_letter_at_s": round(max(reader.arrived.values()), 3) if reader.arrived else None,
        "first_dead_letter_at_s": round(min(reader.arrived.values()), 3) if reader.arrived else None,
        "good_acked": good, "good_expected": good_total, "duplicate_good_deliveries": dup_good,
        "dead_letters": len(reader.arrived), "poison_expected": poison_total,
        "good_in_dlq": reader.good, "duplicate_dead_letters": reader.duplicates,
        "deliveries": deliveries, "nacks": nacks,
        "poison_redelivery_gap_ms_p50": round(statistics.median(gaps) * 1000, 1) if gaps else None,
        "poison_redelivery_gap_ms_min": round(min(gaps) * 1000, 1) if gaps else None,
        "poison_first_delivery_to_dlq_s_p50": round(statistics.median(to_dlq), 3) if to_dlq else None,
        "poison_first_delivery_to_dlq_s_min": round(to_dlq[0], 3) if to_dlq else None,
        "broker_cpu_s": round(cpu_b, 2), "consumer_proc_cpu_s": round(cpu_c, 2),
    }


def scenario(url: str, topic: str, ratio: float, policy: str, a: argparse.Namespace, broker_pid: int,
             results: multiprocessing.Queue) -> None:
    """Child process: produce, then consume; the result goes back through `results`."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    produce_s = produce(url, topic, a.messages, ratio, a.size, batching=not a.no_batching)
    r = consume(url, topic, a.messages, ratio, policy, a.max_redeliveries, a.nack_delay_ms, a.timeout, broker_pid)
    r["produce_s"] = round(produce_s, 3)
    results.put(r)


def run(a: argparse.Namespace) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="letterbox-failpath-"))
    broker = Broker(tmp / "data", log=tmp / "broker.log").start()
    tag = uuid.uuid4().hex[:6]
    out: dict[str, object] = {"messages": a.messages, "fail_ratio": a.fail_ratio, "mode": a.mode,
                              "max_redeliveries": a.max_redeliveries, "nack_delay_ms": a.nack_delay_ms}
    # Each scenario runs in a child process so that a client crash (the official client
    # 3.13 segfaulted in --mode client at 100,000 messages) cannot leave the broker running.
    ctx = multiprocessing.get_context("spawn")
    try:
        plan = [("happy-plain", 0.0, "none"), ("happy", 0.0, a.mode), ("failure", a.fail_ratio, a.mode)]
        for name, ratio, policy in plan:
            topic = f"persistent://public/default/fp-{name}-{tag}"
            results: multiprocessing.Queue = ctx.Queue()
            child = ctx.Process(target=scenario, args=(broker.url, topic, ratio, policy, a, broker.pid, results))
            child.start()
            deadline = time.monotonic() + a.timeout + 120
            while True:
                try:
                    out[name] = results.get(timeout=1)
                    break
                except queue.Empty:
                    if not child.is_alive() or time.monotonic() > deadline:
                        out[name] = {"completed": False, "crashed": f"exit code {child.exitcode}"}
                        break
            child.join(30)
            if child.is_alive():
                child.kill()
                child.join()
    finally:
        broker.stop()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    base = out["happy"].get("seconds")  # type: ignore[attr-defined]
    for name in ("happy-plain", "happy", "failure"):
        r = out[name]  # type: ignore[assignment]
        if base and "seconds" in r:  # type: ignore[operator]
            r["extra_pct_vs_happy"] = round((r["seconds"] / base - 1) * 100, 1)  # type: ignore[index]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--fail-ratio", type=float, default=0.1)
    ap.add_argument("--max-redeliveries", type=int, default=3)
    ap.add_argument("--mode", choices=["broker", "client"], default="broker")
    ap.add_argument("--nack-delay-ms", type=int, default=100,
                    help="negative_ack_redelivery_delay_ms (the official client raises values below 100 to 100)")
    ap.add_argument("--size", type=int, default=100, help="payload bytes")
    ap.add_argument("--no-batching", action="store_true",
                    help="produce unbatched, the official Python client's default (batching is on otherwise)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds allowed per consume phase")
    ap.add_argument("--keep", action="store_true", help="keep the temp data dir and broker log")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    a = ap.parse_args()
    r = run(a)
    if not a.json:
        print(f"mode={a.mode} messages={a.messages:,} fail-ratio={a.fail_ratio} "
              f"max-redeliveries={a.max_redeliveries} nack-delay={a.nack_delay_ms} ms")
        print(f"{'scenario':<12} {'seconds':>8} {'msgs/s':>9} {'extra %':>8} {'broker CPU s':>13} "
              f"{'consumer CPU s':>15} {'good acked at':>14} {'last DLQ at':>12}")
        for name in ("happy-plain", "happy", "failure"):
            s = r[name]  # type: ignore[index]
            if "seconds" not in s:
                print(f"{name:<12} CRASHED ({s.get('crashed')})")
                continue
            print(f"{name:<12} {s['seconds']:>8} {s['msgs_per_sec']:>9,} {s.get('extra_pct_vs_happy', '-')!s:>8} "
                  f"{s['broker_cpu_s']:>13} {s['consumer_proc_cpu_s']:>15} {s['all_good_acked_at_s']!s:>14} "
                  f"{s['last_dead_letter_at_s']!s:>12}{'' if s['completed'] else '  INCOMPLETE'}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
