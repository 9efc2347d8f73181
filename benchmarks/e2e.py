"""End-to-end throughput: one `letterbox perf produce` and one `letterbox perf consume`
process (official pulsar-client, one ack per message) against a fresh broker.

    .venv/bin/python benchmarks/e2e.py --messages 1000000 --batching on [--sync full]

End-to-end msgs/s = messages / (producer's first send .. consumer's last receive).
Also reports the CPU seconds each of the three processes used (from /proc) and the
broker's peak RSS (VmHWM).
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _broker import PYTHON, Broker, cpu_seconds, memory_mb, thread_cpu_seconds


class CpuWatch(threading.Thread):
    """Samples utime+stime of some pids; keeps the last value seen before each exits."""

    def __init__(self, pids: dict[str, int], interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.interval = interval
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            for name, pid in self.pids.items():
                v = cpu_seconds(pid)
                if v is not None:
                    self.first.setdefault(name, v)
                    self.last[name] = v
            if self.done.wait(self.interval):
                return

    def used(self) -> dict[str, float]:
        return {k: round(self.last[k] - self.first[k], 2) for k in self.last}


def run(messages: int, batching: bool, sync: str, size: int, timeout: float, keep: bool,
        binding: bool = False, profile: str | None = None, gil: bool = False) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="letterbox-e2e-"))
    broker = Broker(tmp / "data", sync=sync, log=tmp / "broker.log").start()
    perf = [PYTHON, "-m", "letterbox", "perf"]
    extra = ["--binding"] if binding else []
    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    procs: list[subprocess.Popen[str]] = []
    try:
        ready = tmp / "consumer.ready"
        consumer = subprocess.Popen(
            [*perf, "consume", "--url", broker.url, "--topic", topic, "--subscription", "e2e",
             "-n", str(messages), "--ready-file", str(ready), "--json", *extra],
            stdout=subprocess.PIPE, text=True)
        procs.append(consumer)
        deadline = time.monotonic() + 60
        while not ready.exists():
            if consumer.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("consumer did not subscribe")
            time.sleep(0.02)
        broker_cpu0 = cpu_seconds(broker.pid) or 0.0
        broker_loop0 = thread_cpu_seconds(broker.pid).get(broker.pid, 0.0)
        producer = subprocess.Popen(
            [*perf, "produce", "--url", broker.url, "--topic", topic, "-n", str(messages), "-s", str(size),
             "--batching" if batching else "--no-batching", "--json", *extra],
            stdout=subprocess.PIPE, text=True)
        procs.append(producer)
        if profile:
            # py-spy samples the broker (both threads, idle waits excluded) while the producer runs
            procs.append(subprocess.Popen(
                [str(Path(PYTHON).parent / "py-spy"), "record", "--pid", str(broker.pid), "--format", "raw",
                 "-r", "200", *(["--gil"] if gil else []), "-o", profile],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        watch = CpuWatch({"broker": broker.pid, "producer": producer.pid, "consumer": consumer.pid})
        watch.start()
        p_out, _ = producer.communicate(timeout=timeout)
        c_out, _ = consumer.communicate(timeout=timeout)
        if profile:
            procs[-1].send_signal(signal.SIGINT)
            procs[-1].wait(30)
        broker_cpu = (cpu_seconds(broker.pid) or 0.0) - broker_cpu0
        threads = thread_cpu_seconds(broker.pid)
        loop_cpu = threads.pop(broker.pid, 0.0) - broker_loop0
        watch.done.set()
        watch.join()
        if producer.returncode or consumer.returncode:
            raise RuntimeError(f"perf failed: produce rc={producer.returncode} consume rc={consumer.returncode}")
        p, c = json.loads(p_out.strip().splitlines()[-1]), json.loads(c_out.strip().splitlines()[-1])
        mem = memory_mb(broker.pid)
        e2e_seconds = c["finished_at"] - p["started_at"]
        return {
            "messages": messages, "size": size, "batching": batching, "sync": sync, "binding": binding,
            "e2e_seconds": round(e2e_seconds, 3),
            "e2e_msgs_per_sec": round(messages / e2e_seconds),
            "produce_msgs_per_sec": round(p["msgs_per_sec"]),
            "consume_msgs_per_sec": round(c["msgs_per_sec"]),
            "produce_p50_ms": round(p["p50_ms"], 2), "produce_p99_ms": round(p["p99_ms"], 2),
            "consume_p50_ms": round(c["p50_ms"], 2), "consume_p99_ms": round(c["p99_ms"], 2),
            "broker_cpu_seconds": round(broker_cpu, 2),
            "broker_cpu_us_per_msg": round(broker_cpu * 1e6 / messages, 1),
            # the event loop thread's share; the rest is the storage writer and worker threads
            "broker_loop_cpu_seconds": round(loop_cpu, 2),
            "cpu_seconds_sampled": watch.used(),
            "broker_peak_rss_mb": round(mem["VmHWM"], 1),
            "broker_rss_mb": round(mem["VmRSS"], 1),
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        broker.stop()
        if not keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--batching", choices=["on", "off"], default="on")
    ap.add_argument("--sync", choices=["full", "normal", "off"], default="full")
    ap.add_argument("--size", type=int, default=100, help="payload bytes")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for produce and consume")
    ap.add_argument("--keep", action="store_true", help="keep the temp data dir and broker log")
    ap.add_argument("--binding", action="store_true",
                    help="perf produce/consume call the client's pybind11 layer directly (see perf.py)")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    ap.add_argument("--profile", metavar="FILE",
                    help="record the broker with py-spy (raw format) into FILE; see profile_top.py")
    ap.add_argument("--gil", action="store_true",
                    help="with --profile: sample only threads holding the GIL (the Python CPU, not waits)")
    a = ap.parse_args()
    r = run(a.messages, a.batching == "on", a.sync, a.size, a.timeout, a.keep, a.binding, a.profile, a.gil)
    if a.json:
        print(json.dumps(r))
        return
    print(
        f"e2e batching={a.batching} sync={a.sync}{' binding' if a.binding else ''}: {r['messages']:,} x {a.size} B in {r['e2e_seconds']}s = "
        f"{r['e2e_msgs_per_sec']:,} msg/s | produce p50 {r['produce_p50_ms']} ms p99 {r['produce_p99_ms']} ms | "
        f"consume p50 {r['consume_p50_ms']} ms p99 {r['consume_p99_ms']} ms | broker CPU {r['broker_cpu_seconds']} s, "
        f"peak RSS {r['broker_peak_rss_mb']} MB | CPU s {r['cpu_seconds_sampled']}"
    )
    print(json.dumps(r))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
