"""Delayed delivery: broker memory with N pending delayed messages, restart, and precision.

    .venv/bin/python benchmarks/delayed_memory.py --messages 1000000 --delay-s 3600
    .venv/bin/python benchmarks/delayed_memory.py --precision

Memory (default): a Shared consumer (receiver_queue_size 1000) is subscribed so the
subscription exists and has permits (the broker indexes a delayed entry when its
dispatcher reads it), then N 100-byte messages are produced with
deliver_at = now + delay (not batched: the client never batches delayed messages).
Once the broker's CPU time stops increasing for 3 s it has read and indexed them all;
the broker's VmRSS / VmHWM before producing and after indexing are reported, and a
receive with a 1 s timeout must time out (nothing delivered early). --deliver-at
fixed (default) gives every message the same time, all in one second of the index;
per-message gives each send time + delay, spread over the produce run. The broker is then
restarted on the same data dir: time to listening, RSS when listening, and RSS once a
reconnected consumer made it re-index everything (CPU quiet for 3 s again).

Precision (--precision): 10,000 delayed messages due evenly over 1 s starting 3 s from
now on a Shared subscription; lateness = receive time - due time (both time.time() on
this machine), p50 / p99 / max, and the number delivered before they were due.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from _broker import Broker, cpu_seconds, memory_mb

TOPIC, SUB = "delayed", "delayed-sub"


def quiet_logger() -> object:
    import pulsar

    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def mem(pid: int) -> dict[str, float]:
    m = memory_mb(pid)
    return {"VmRSS_mb": round(m["VmRSS"], 1), "VmHWM_mb": round(m["VmHWM"], 1)}


def wait_cpu_quiet(pid: int, quiet_s: float = 3.0, timeout: float = 900.0) -> float:
    """Poll the broker's CPU time until it has not increased for `quiet_s`; returns the
    seconds waited. A tick (10 ms) of slack absorbs timer/keepalive noise."""
    t0 = time.perf_counter()
    last = cpu_seconds(pid) or 0.0
    last_change = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        time.sleep(0.25)
        now = cpu_seconds(pid)
        if now is None:
            raise RuntimeError("broker exited")
        if now - last > 0.011:
            last, last_change = now, time.perf_counter()
        elif time.perf_counter() - last_change >= quiet_s:
            return last_change - t0
    raise RuntimeError(f"broker CPU still busy after {timeout}s")


def subscribe(client: object, receiver_queue_size: int = 1000) -> object:
    import pulsar

    return client.subscribe(  # type: ignore[attr-defined]
        TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared,
        receiver_queue_size=receiver_queue_size,
        initial_position=pulsar.InitialPosition.Earliest,
    )


def nothing_early(consumer: object) -> bool:
    import pulsar

    try:
        msg = consumer.receive(timeout_millis=1000)  # type: ignore[attr-defined]
    except pulsar.Timeout:
        return True
    print(f"EARLY delivery: {msg.message_id()} at {time.time():.3f}")
    return False


# Unacknowledged sends the producer keeps in flight. Apache Pulsar stops reading a connection
# with more than maxPendingPublishRequestsPerConnection (1000) publishes outstanding, and 4.0.8
# never resumed it here: the client's keep-alive then closes the connection every 30 s.
MAX_PENDING = 1000


def produce_delayed(url: str, n: int, size: int, delay_ms: int, fixed: bool) -> float:
    """fixed: every message gets the same deliver_at (now + delay, taken once);
    otherwise each message gets its own (send time + delay)."""
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=60, io_threads=1, logger=quiet_logger())
    try:
        producer = client.create_producer(
            TOPIC, batching_enabled=False, max_pending_messages=MAX_PENDING,
            block_if_queue_full=True, send_timeout_millis=120_000,
        )
        payload = b"x" * size
        t0 = time.perf_counter()
        send = producer.send_async
        if fixed:
            deliver_at = int(time.time() * 1000) + delay_ms
            for _ in range(n):
                send(payload, None, deliver_at=deliver_at)
        else:
            now = time.time
            for _ in range(n):
                send(payload, None, deliver_at=int(now() * 1000) + delay_ms)
        producer.flush()
        elapsed = time.perf_counter() - t0
        producer.close()
        return elapsed
    finally:
        client.close()


def run_memory(a: argparse.Namespace, tmp: Path) -> dict[str, object]:
    import pulsar

    data = tmp / "data"
    out: dict[str, object] = {"messages": a.messages, "size": a.size, "delay_s": a.delay_s,
                              "deliver_at": a.deliver_at}
    broker = Broker(data, sync=a.sync, log=tmp / "broker.log").start()
    try:
        client = pulsar.Client(broker.url, operation_timeout_seconds=120, logger=quiet_logger())
        consumer = subscribe(client)
        wait_cpu_quiet(broker.pid, quiet_s=1.0)
        out["before_produce"] = before = mem(broker.pid)
        cpu0 = cpu_seconds(broker.pid) or 0.0
        t0 = time.perf_counter()
        produce_s = produce_delayed(broker.url, a.messages, a.size, a.delay_s * 1000, a.deliver_at == "fixed")
        out["produce_seconds"] = round(produce_s, 1)
        out["produce_msgs_per_sec"] = round(a.messages / produce_s)
        wait_cpu_quiet(broker.pid)
        out["produced_and_indexed_seconds"] = round(time.perf_counter() - t0 - 3.0, 1)
        out["broker_cpu_seconds"] = round((cpu_seconds(broker.pid) or 0.0) - cpu0, 1)
        out["after_indexing"] = after = mem(broker.pid)
        out["rss_delta_mb"] = round(after["VmRSS_mb"] - before["VmRSS_mb"], 1)
        out["hwm_delta_mb"] = round(after["VmHWM_mb"] - before["VmRSS_mb"], 1)
        out["nothing_delivered_early"] = nothing_early(consumer)
        consumer.close()
        client.close()
        out["data_dir_mb"] = round(du_mb(data), 1)
        t0 = time.perf_counter()
        broker.stop()
        out["stop_seconds"] = round(time.perf_counter() - t0, 2)
        out["stop_returncode"] = broker.proc.returncode if broker.proc else None
        print(json.dumps(out), flush=True)

        t0 = time.perf_counter()
        broker = Broker(data, sync=a.sync, log=tmp / "broker2.log").start()
        out["restart_listening_seconds"] = round(time.perf_counter() - t0, 2)
        out["after_restart"] = mem(broker.pid)
        client = pulsar.Client(broker.url, operation_timeout_seconds=120, logger=quiet_logger())
        t0 = time.perf_counter()
        consumer = subscribe(client)
        out["resubscribe_seconds"] = round(time.perf_counter() - t0, 2)
        out["reindex_seconds"] = round(wait_cpu_quiet(broker.pid), 1)
        out["after_restart_reindexed"] = mem(broker.pid)
        out["nothing_delivered_early_after_restart"] = nothing_early(consumer)
        consumer.close()
        client.close()
    finally:
        broker.stop()
    return out


def pct(sorted_vals: list[float], p: float) -> float:
    return sorted_vals[min(len(sorted_vals) - 1, int(p / 100 * len(sorted_vals)))]


def run_precision(a: argparse.Namespace, tmp: Path) -> dict[str, object]:
    import pulsar

    n = a.precision_messages
    out: dict[str, object] = {"messages": n, "start_in_s": 3, "spread_s": 1}
    broker = Broker(tmp / "data", sync=a.sync, log=tmp / "broker.log").start()
    try:
        client = pulsar.Client(broker.url, operation_timeout_seconds=60, logger=quiet_logger())
        consumer = subscribe(client)
        producer = client.create_producer(
            TOPIC, batching_enabled=False, max_pending_messages=10_000, block_if_queue_full=True,
        )
        base = int(time.time() * 1000) + 3000
        dues = [base + i * 1000 // n for i in range(n)]
        t0 = time.perf_counter()
        for i, due in enumerate(dues):
            producer.send_async(f"{i}:{due}".encode(), None, deliver_at=due)
        producer.flush()
        out["produce_seconds"] = round(time.perf_counter() - t0, 2)
        out["produce_finished_before_first_due_ms"] = base - int(time.time() * 1000)
        late: list[float] = []
        received = 0
        deadline = time.time() + 30
        while received < n and time.time() < deadline:
            try:
                msg = consumer.receive(timeout_millis=1000)
            except pulsar.Timeout:
                continue
            now = time.time() * 1000
            due = int(msg.data().split(b":")[1])
            late.append(now - due)
            consumer.acknowledge(msg)
            received += 1
        producer.close()
        consumer.close()
        client.close()
    finally:
        broker.stop()
    late.sort()
    out["received"] = received
    out["early"] = sum(1 for x in late if x < 0)
    out["lateness_ms"] = {
        "min": round(late[0], 1), "p50": round(pct(late, 50), 1),
        "p99": round(pct(late, 99), 1), "max": round(late[-1], 1),
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--delay-s", type=int, default=3600)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--deliver-at", choices=["fixed", "per-message"], default="fixed",
                    help="one deliver_at for all messages (now + delay), or send time + delay each")
    ap.add_argument("--sync", choices=["full", "normal", "off"], default="full")
    ap.add_argument("--precision", action="store_true", help="run the precision test instead")
    ap.add_argument("--precision-messages", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the temp data dir")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="letterbox-delayed-"))
    try:
        out = run_precision(a, tmp) if a.precision else run_memory(a, tmp)
    finally:
        if not a.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
