"""Dead-letter listings of large dead letters: --count dead letters (default 150), each with a
4 MB property, are stored in a dead letter topic; then the admin routes the console calls are
requested while another connection sends a raw PING every 20 ms and the broker's RSS is
sampled every 20 ms:

  * the console's DLQ view: GET .../letterbox/deadLetters?limit=1000 (dlq.js), and every page
    after it (following the Link rel="next" header);
  * the console's message view: GET .../letterbox/deadLetters?limit=10000 (message.js);
  * the REST listing with its default limit: GET .../letterbox/deadLetters;
  * the whole value of one property: GET .../letterbox/deadLetters/{id}/property?name=...

    .venv/bin/python benchmarks/dlq_listing_bounds.py --count 150

Prints per request its status, response bytes, pages, time, the broker's RSS growth over its
value before the request (peak sampled) and the PING round trip max and p99 during it, then a
JSON object (--json for JSON only). The dead letters are produced straight into a topic named
`…-DLQ` (what the listing reads is the same as for dead letters a subscription moved).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pulsar
from _broker import Broker, memory_mb

from letterbox.protocol import FrameDecoder, client_commands, commands, pb

PROPERTY_BYTES = 4 * 1000 * 1000
DLQ = "persistent://public/default/orders-s-DLQ"
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def fill(url: str, count: int) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=120, logger=LOGGER)
    producer = client.create_producer(DLQ, batching_enabled=False, send_timeout_millis=120_000)
    for i in range(count):
        big = os.urandom(PROPERTY_BYTES // 2).hex()
        producer.send(b"payload-%d" % i, properties={"big": big, "DEAD_LETTER_REASON": "max-redeliveries"})
    client.close()


class Pinger:
    """A raw connection sending PING every 20 ms and timing each PONG."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(client_commands.connect("pinger", 21))
        self.decoder = FrameDecoder()
        self._frame()  # CONNECTED
        self.rtts: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def _frame(self) -> pb.BaseCommand:
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame.command
            self.decoder.feed(self.sock.recv(65536))

    def run(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            self.sock.sendall(commands.ping())
            while self._frame().type != pb.BaseCommand.PONG:
                pass
            self.rtts.append((t, time.perf_counter() - t))
            self.stop.wait(0.02)


def get(url: str) -> tuple[int, int, str | None]:
    """(status, body bytes, next page URL) of one GET."""
    try:
        resp = urllib.request.urlopen(url, timeout=300)
    except urllib.error.HTTPError as exc:
        return exc.code, len(exc.read()), None
    with resp:
        body = resp.read()
        link = resp.headers.get("Link") or ""
        m = re.search(r"<([^>]+)>;\s*rel=\"next\"", link)
        nxt = urllib.parse.urljoin(url, m.group(1)) if m else None
        return resp.status, len(body), nxt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=150)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="letterbox-dlqlist-"))
    broker = Broker(tmp / "data", log=tmp / "broker.log").start()
    peak = [0.0]
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.is_set():
            peak[0] = max(peak[0], memory_mb(broker.pid).get("VmRSS", 0.0))
            time.sleep(0.02)

    results = []
    try:
        t0 = time.perf_counter()
        fill(broker.url, a.count)
        fill_s = time.perf_counter() - t0
        admin = broker.admin_url()
        base = f"{admin}/admin/v2/persistent/{DLQ.removeprefix('persistent://')}/letterbox/deadLetters"
        first_id = json.loads(urllib.request.urlopen(base + "?limit=1", timeout=60).read())[0]["messageId"]
        pinger = Pinger(int(broker.url.rsplit(":", 1)[1]))
        threading.Thread(target=sample, daemon=True).start()
        time.sleep(1.0)
        cases = [
            ("console DLQ view (limit=1000, every page)", base + "?limit=1000", True),
            ("console message view (limit=10000)", base + "?limit=10000", False),
            ("REST listing (default limit)", base, False),
            ("one property's whole value", f"{base}/{first_id}/property?name=big", False),
        ]
        for name, url, follow in cases:
            time.sleep(0.5)
            before = memory_mb(broker.pid)["VmRSS"]
            peak[0] = before
            start = time.perf_counter()
            status, nbytes, nxt = get(url)
            pages, largest = 1, nbytes
            while follow and nxt is not None:
                status, n, nxt = get(nxt)
                pages, nbytes, largest = pages + 1, nbytes + n, max(largest, n)
            end = time.perf_counter()
            time.sleep(0.1)
            rtts = sorted(d for t, d in pinger.rtts if start <= t <= end)
            results.append({
                "request": name, "status": status, "bytes": nbytes, "pages": pages, "largest_page_bytes": largest,
                "seconds": round(end - start, 2), "rss_before_mb": round(before, 1),
                "rss_growth_mb": round(peak[0] - before, 1),
                "ping_max_ms": round(rtts[-1] * 1000, 1) if rtts else None,
                "ping_p99_ms": round(rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))] * 1000, 1) if rtts else None,
                "pings": len(rtts),
            })
        pinger.stop.set()
        stop_sampling.set()
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"dead_letters": a.count, "property_bytes": PROPERTY_BYTES, "fill_seconds": round(fill_s, 1),
           "requests": results}
    if not a.json:
        print(f"{a.count} dead letters with a {PROPERTY_BYTES // 1000 // 1000} MB property each (stored in {fill_s:.0f} s)")
        for r in results:
            print(f"{r['request']}: {r['status']}, {r['bytes']} B in {r['pages']} page(s) ({r['seconds']} s); "
                  f"RSS +{r['rss_growth_mb']} MB; PING max {r['ping_max_ms']} ms, p99 {r['ping_p99_ms']} ms")
    print(json.dumps(out))
    sys.exit(0)


if __name__ == "__main__":
    main()
