"""Memory under a 5 MB flood (issue 13, Memory acceptance): one producer sends 5 MB messages as
fast as it can to a topic with no consumer, while a healthy second client sends small
messages one at a time (send() -> receipt) on another topic; broker RSS is sampled every
20 ms. Optionally (--stuck-consumer) a raw-socket consumer on the flooded topic grants 1,000
permits and never reads its socket, so the broker may hold no more than its socket buffers
of what it dispatched.

    .venv/bin/python benchmarks/backpressure_memory.py --seconds 30

Prints the broker's idle RSS, peak RSS (sampled and VmHWM), MB/s stored, the data directory
size, the broker's CPU seconds during the flood (from /proc), the healthy client's produce
latency p50/p99/max (and before the flood), the load average before and after, and the /metrics
backpressure counters, then a JSON object (--json for JSON only). The flood producer runs in
its own process.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pulsar
from _broker import Broker, cpu_seconds, memory_mb

SIZE = 5_000_000  # 5 MB (the default max_message_size is 5 MiB)
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def flood(url: str, topic: str, seconds: float, pending: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    client = pulsar.Client(url, operation_timeout_seconds=60, logger=LOGGER)
    producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=pending,
                                      block_if_queue_full=True, send_timeout_millis=120_000)
    ok = errors = 0
    lock = threading.Lock()

    def sent(res: pulsar.Result, _id: object) -> None:
        nonlocal ok, errors
        with lock:
            if res == pulsar.Result.Ok:
                ok += 1
            else:
                errors += 1

    body = os.urandom(1024) * (SIZE // 1024) + b"x" * (SIZE % 1024)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        producer.send_async(body, sent)
        n += 1
    producer.flush()
    out.put({"sent": n, "ok": ok, "errors": errors, "seconds": round(time.monotonic() - t0, 2)})
    producer.close()
    client.close()


def healthy(url: str, topic: str, stop: threading.Event, lat: list[float]) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=30, logger=LOGGER)
    producer = client.create_producer(topic, batching_enabled=False)
    while not stop.is_set():
        t = time.perf_counter()
        producer.send(b"h" * 100)
        lat.append(time.perf_counter() - t)
        stop.wait(0.02)
    client.close()


def stuck_consumer(port: int, topic: str) -> socket.socket:
    """Subscribe over a raw socket, grant 1,000 permits, never read again."""
    from letterbox.protocol import client_commands
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(client_commands.connect("stuck-consumer", 21))
    time.sleep(0.5)
    sock.sendall(client_commands.subscribe(topic, "stuck", 1, 1, sub_type=1))
    time.sleep(0.5)
    sock.sendall(client_commands.flow(1, 1000))
    return sock


def metrics(admin: str) -> dict[str, float]:
    with urllib.request.urlopen(admin + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    names = ("letterbox_connection_read_pauses_total", "letterbox_publish_buffer_pauses_total",
             "letterbox_publish_buffer_bytes")
    return {n: float(m.group(1)) for n in names if (m := re.search(rf"^{n}{{[^}}]*}} (\S+)$", text, re.M))}


def pct(xs: list[float], p: float) -> float:
    return round(sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000, 1) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--pending", type=int, default=32, help="the flood producer's max_pending_messages")
    ap.add_argument("--stuck-consumer", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", metavar="PATH", help="py-spy record the broker during the flood (raw format)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="letterbox-bpmem-"))
    broker = Broker(tmp / "data", log=tmp / "broker.log").start()
    m = re.search(r"admin on (http://[\d.]+:\d+)", broker.log.read_text())
    admin = m.group(1) if m else ""
    peak = [0.0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], memory_mb(broker.pid).get("VmRSS", 0.0))
            time.sleep(0.02)

    try:
        idle = memory_mb(broker.pid)["VmRSS"]
        flood_topic = "persistent://public/default/flood"
        sock = stuck_consumer(int(broker.url.rsplit(":", 1)[1]), flood_topic) if a.stuck_consumer else None
        threading.Thread(target=sample, daemon=True).start()
        stop, lat = threading.Event(), []  # type: ignore[var-annotated]
        h = threading.Thread(target=healthy, args=(broker.url, "persistent://public/default/healthy", stop, lat))
        h.start()
        time.sleep(1.0)  # the healthy client's baseline before the flood
        base = len(lat)
        load_before = [round(x, 2) for x in os.getloadavg()]
        cpu0 = cpu_seconds(broker.pid) or 0.0
        ctx = multiprocessing.get_context("spawn")
        q: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        p = ctx.Process(target=flood, args=(broker.url, flood_topic, a.seconds, a.pending, q))
        p.start()
        spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(broker.pid), "-d", str(int(a.seconds)), "-r", "100",
                                "--threads", "-f", "raw", "-o", a.profile], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) if a.profile else None
        fr = q.get(timeout=a.seconds + 300)
        cpu = (cpu_seconds(broker.pid) or 0.0) - cpu0
        if spy is not None:
            spy.wait(60)
        p.join(60)
        stop.set()
        h.join(30)
        sampling.set()
        during = lat[base:]
        data_mb = sum(f.stat().st_size for f in (tmp / "data").rglob("*") if f.is_file()) / 1e6
        r = {
            "seconds": a.seconds, "message_bytes": SIZE, "flood": fr,
            "stored_mb_per_s": round(fr["ok"] * SIZE / 1e6 / fr["seconds"], 1),
            "broker_rss_idle_mb": round(idle, 1), "broker_rss_peak_sampled_mb": round(peak[0], 1),
            "broker_vmhwm_mb": round(memory_mb(broker.pid)["VmHWM"], 1), "data_dir_mb": round(data_mb),
            "broker_cpu_s": round(cpu, 2),
            "broker_cpu_ms_per_message": round(cpu * 1000 / fr["ok"], 2) if fr["ok"] else None,
            "healthy_before_p50_ms": pct(lat[:base], 0.5), "healthy_before_max_ms": pct(lat[:base], 1.0),
            "healthy_sends": len(during), "healthy_p50_ms": pct(during, 0.5), "healthy_p99_ms": pct(during, 0.99),
            "healthy_max_ms": round(max(during) * 1000, 1) if during else None,
            "healthy_mean_ms": round(statistics.mean(during) * 1000, 1) if during else None,
            "stuck_consumer": a.stuck_consumer, "metrics": metrics(admin) if admin else {},
            "loadavg_before": load_before, "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
        if sock is not None:
            sock.close()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if not a.json:
        print(f"flood: {fr['ok']} x 5 MB stored in {fr['seconds']} s ({r['stored_mb_per_s']} MB/s), data dir {r['data_dir_mb']} MB")
        print(f"broker RSS: idle {r['broker_rss_idle_mb']} MB, peak {r['broker_rss_peak_sampled_mb']} MB "
              f"(VmHWM {r['broker_vmhwm_mb']} MB); broker CPU {r['broker_cpu_s']} s "
              f"({r['broker_cpu_ms_per_message']} ms per 5 MB message)")
        print(f"healthy client before the flood: p50 {r['healthy_before_p50_ms']} ms, max {r['healthy_before_max_ms']} ms")
        print(f"healthy client: {r['healthy_sends']} sends, p50 {r['healthy_p50_ms']} ms, p99 {r['healthy_p99_ms']} ms, "
              f"max {r['healthy_max_ms']} ms; load before {load_before}, after {r['loadavg']}")
    print(json.dumps(r))
    sys.exit(0)


if __name__ == "__main__":
    main()
