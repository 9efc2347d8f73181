"""Slow senders holding large frames beside a healthy producer: N raw connections each
complete the handshake, then send all but the last byte of a 5 MB SEND frame and hold it
(a "slowloris" that keeps its frame unfinished), while a healthy client (the official
pulsar-client) sends 100-byte messages one at a time (send() -> receipt) on another topic
all along. After --hold seconds (less than frame_timeout_seconds, 30) the slow connections
are reset by the client side (or, with --end timeout, closed by the broker's frame time limit,
set to --hold); the broker's RSS is read before the flood, at its peak, and
--after seconds after they closed.

    .venv/bin/python benchmarks/slowloris_fairness.py --connections 100 --hold 15 --after 10

Prints the healthy producer's latency p50/p99/max before, during and after the flood, the
broker's RSS (idle, peak, after) and whether RSS came back within 20 % of idle, then a JSON
object (--json for JSON only).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import pulsar
from _broker import Broker, memory_mb

from letterbox.protocol import client_commands

FRAME = 5 * 1024 * 1024  # what each slow connection claims and almost completes
CHUNK = 256 * 1024
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def slow_sender(port: int, sent: list[int], ready: threading.Barrier, socks: list[socket.socket]) -> None:
    """Handshake, then all of a 5 MB frame but its last byte, and hold."""
    sock = socket.create_connection(("127.0.0.1", port))
    socks.append(sock)
    sock.sendall(client_commands.connect("slowloris", 21))
    sock.recv(65536)  # CONNECTED
    ready.wait()
    header = struct.pack(">II", FRAME, 20)  # claims a 5 MB frame with a 20-byte command
    body = b"\x08" * (FRAME - 4 - 1)
    try:
        sock.sendall(header)
        for i in range(0, len(body), CHUNK):
            sock.sendall(body[i:i + CHUNK])
            sent[0] += len(body[i:i + CHUNK])
    except OSError:
        return  # closed by the broker or by the end of the run


def close(sock: socket.socket) -> None:
    """Abort (RST, as a client that dies does: a FIN would wait behind the unsent bytes the
    broker is not reading); shutdown first, or a send blocked in another thread keeps it open."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def healthy(url: str, stop: threading.Event, lat: list[tuple[float, float]]) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=60, logger=LOGGER)
    producer = client.create_producer("persistent://public/default/healthy", batching_enabled=False,
                                      send_timeout_millis=60_000)
    while not stop.is_set():
        t = time.perf_counter()
        producer.send(b"h" * 100)
        lat.append((t, time.perf_counter() - t))
        stop.wait(0.02)
    client.close()


def pct(xs: list[float], p: float) -> float | None:
    return round(sorted(xs)[min(len(xs) - 1, int(len(xs) * p))] * 1000, 1) if xs else None


def summary(xs: list[float]) -> dict[str, float | int | None]:
    return {"sends": len(xs), "p50_ms": pct(xs, 0.5), "p99_ms": pct(xs, 0.99), "max_ms": pct(xs, 1.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--hold", type=float, default=15.0, help="seconds the slow connections hold their frames")
    ap.add_argument("--after", type=float, default=10.0, help="seconds after they close to read RSS")
    ap.add_argument("--end", choices=("abort", "timeout"), default="abort",
                    help="abort: the clients reset their connections after --hold; timeout: the broker's "
                         "frame_timeout_seconds (set to --hold) closes them")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.end == "timeout":
        os.environ["LETTERBOX_FRAME_TIMEOUT_SECONDS"] = str(a.hold)
    tmp = Path(tempfile.mkdtemp(prefix="letterbox-slowloris-"))
    broker = Broker(tmp / "data", log=tmp / "broker.log").start()
    port = int(broker.url.rsplit(":", 1)[1])
    peak = [0.0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], memory_mb(broker.pid).get("VmRSS", 0.0))
            time.sleep(0.05)

    socks: list[socket.socket] = []
    try:
        stop, lat = threading.Event(), []  # type: ignore[var-annotated]
        h = threading.Thread(target=healthy, args=(broker.url, stop, lat))
        h.start()
        time.sleep(2.0)  # the healthy client's baseline (and the broker settled)
        idle = memory_mb(broker.pid)["VmRSS"]
        threading.Thread(target=sample, daemon=True).start()
        sent = [0]
        ready = threading.Barrier(a.connections + 1)
        threads = [threading.Thread(target=slow_sender, args=(port, sent, ready, socks), daemon=True)
                   for _ in range(a.connections)]
        for t in threads:
            t.start()
        ready.wait(timeout=60)
        flood_start = time.perf_counter()
        time.sleep(a.hold)
        flood_end = time.perf_counter()
        if a.end == "abort":
            for s in socks:
                close(s)
        time.sleep(a.after)
        after = memory_mb(broker.pid)["VmRSS"]
        log_text = broker.log.read_text(errors="replace")
        stop.set()
        h.join(60)
        sampling.set()
        before = [d for t, d in lat if t < flood_start]
        during = [d for t, d in lat if flood_start <= t < flood_end]
        later = [d for t, d in lat if t >= flood_end]
        r = {
            "connections": a.connections, "end": a.end, "frame_bytes": FRAME, "hold_s": a.hold, "after_s": a.after,
            "slow_bytes_sent_mb": round(sent[0] / 1e6), "before": summary(before), "during": summary(during),
            "after": summary(later), "rss_idle_mb": round(idle, 1), "rss_peak_mb": round(peak[0], 1),
            "rss_after_mb": round(after, 1), "rss_after_vs_idle": round(after / idle, 3),
            "rss_back_within_20pct": after <= idle * 1.2,
            "closed_seen_by_broker": log_text.count("the peer went away"),
            "closed_by_frame_timeout": log_text.count("a frame stayed incomplete"),
        }
    finally:
        for s in socks:
            close(s)
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if not a.json:
        for name in ("before", "during", "after"):
            s = r[name]
            print(f"healthy producer {name:6}: {s['sends']:5} sends, p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, "
                  f"max {s['max_ms']} ms")
        print(f"slow connections: {a.connections} x {FRAME} B frames, {r['slow_bytes_sent_mb']} MB sent, held {a.hold} s")
        print(f"broker RSS: idle {r['rss_idle_mb']} MB, peak {r['rss_peak_mb']} MB, {a.after} s after they closed "
              f"{r['rss_after_mb']} MB ({r['rss_after_vs_idle']:.2f} x idle)")
    print(json.dumps(r))
    sys.exit(0)


if __name__ == "__main__":
    main()
