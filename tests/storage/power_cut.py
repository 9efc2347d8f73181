"""Power cuts under load, for tests/storage/test_power_loss.py and power_cut_soak.py.

A broker runs with its data dir on volatile_fs.py (a FUSE file system that drops whatever was
not fsynced when it is unmounted). A workload runs against it: a producer (some messages
delayed by 1 s, every ninth one a poison message, every 97th a large one kept in a payload
file), a Shared consumer that acks, nacks the
poison ones until the broker dead-letters them (letterbox.dlq.max_redeliveries = 2), and a
redrive of the DLQ back to the topic now and then. At a random moment the power is cut: the
broker is killed, the file system unmounted (its unsynced writes gone), mounted again, the
broker restarted. After each restart:
  * every receipted message is in the topic (read from the earliest entry; acked entries are
    kept for the replay window);
  * a poison message is in the topic once more than in the DLQ while it is in flight, as often
    otherwise (each dead-letter move and each redrive is one atomic step: never both, never
    neither);
  * no message acked more than WINDOW seconds before the cut is delivered again;
  * a message's redelivery count never goes down, a delayed message never arrives early.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar

from tests.conftest import REPLAY_WINDOW, BrokerProcess, _quiet_logger

HERE = Path(__file__).resolve().parent
TOPIC = "persistent://public/default/power"
DLQ = f"{TOPIC}-s-DLQ"
WINDOW = 2.0  # seconds: acks the client groups (100 ms) and the broker writes with the cursor
DELAY_MS = 1000


LARGE = 1_100_000  # every 97th message: stored in a payload file of its own


def kind(i: int) -> str:
    return "poison" if i % 9 == 0 else "delayed" if i % 9 == 4 else "plain"


def body_of(i: int) -> bytes:
    body = f"m{i}".encode()
    return body + b"|" + b"L" * LARGE if i % 97 == 50 else body


def name_of(data: bytes) -> str:
    return data.split(b"|", 1)[0].decode()


@dataclass
class Ledger:
    """What the workload was told, across every cut."""
    receipted: set[str] = field(default_factory=set)
    acked_at: dict[str, float] = field(default_factory=dict)
    due_ms: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # message id -> highest redelivery count seen
    nacks: int = 0
    redrives: int = 0
    violations: list[str] = field(default_factory=list)
    next_i: int = 0
    last_cut: float = 0.0


class Rig:
    def __init__(self, root: Path) -> None:
        self.platter, self.mnt = root / "platter", root / "mnt"
        self.platter.mkdir(parents=True, exist_ok=True)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.data = self.mnt / "data"
        self.fs: subprocess.Popen[bytes] | None = None
        self.broker: BrokerProcess | None = None

    def mount(self) -> None:
        self.fs = subprocess.Popen([sys.executable, str(HERE / "volatile_fs.py"), str(self.platter), str(self.mnt)],
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.mnt):
            if time.monotonic() > deadline or self.fs.poll() is not None:
                raise RuntimeError("the volatile file system did not mount (is fuse3 installed? make fuse)")
            time.sleep(0.02)
        self.data.mkdir(exist_ok=True)  # its name becomes durable when the broker starts (it syncs the parent)

    def start_broker(self) -> BrokerProcess:
        self.broker = BrokerProcess(self.data, env=dict(REPLAY_WINDOW)).start(timeout=60)
        return self.broker

    def cut(self) -> None:
        """The power cut: the broker dies, unsynced writes are dropped."""
        if self.broker is not None:
            self.broker.kill()
        self.unmount()

    def unmount(self) -> None:
        if self.fs is None:
            return
        for _ in range(100):
            if subprocess.run(["fusermount3", "-u", str(self.mnt)], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        self.fs.wait(30)
        self.fs = None


def read_all(url: str, topic: str) -> list[str]:
    c = pulsar.Client(url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        r = c.create_reader(topic, pulsar.MessageId.earliest, receiver_queue_size=2000)
        out = []
        while r.has_message_available():
            out.append(name_of(r.read_next(10_000).data()))
        return out
    finally:
        c.close()


def check_after_restart(url: str, led: Ledger) -> dict[str, int]:
    in_topic = Counter(read_all(url, TOPIC))
    in_dlq = Counter(read_all(url, DLQ))
    lost = led.receipted - set(in_topic)
    for body in sorted(lost)[:5]:
        led.violations.append(f"receipted {body} is not in the topic")
    bad_moves = [b for b in in_topic if kind(int(b[1:])) == "poison" and in_topic[b] - in_dlq[b] not in (0, 1)]
    bad_moves += [b for b in in_dlq if in_topic[b] < in_dlq[b]]
    for body in bad_moves[:5]:
        led.violations.append(f"poison {body}: {in_topic[body]} times in the topic, {in_dlq[body]} in the DLQ")
    dups = [b for b, n in in_topic.items() if n > 1 and kind(int(b[1:])) != "poison"]
    for body in dups[:5]:
        led.violations.append(f"{body} is in the topic {in_topic[body]} times")
    return {"lost": len(lost), "bad_moves": len(bad_moves), "duplicated": len(dups), "in_dlq": sum(in_dlq.values())}


class Workload:
    def __init__(self, url: str, admin_url: str, led: Ledger, rng: random.Random) -> None:
        self.led, self.rng, self.admin_url = led, rng, admin_url
        self.stop = threading.Event()
        self.client = pulsar.Client(url, operation_timeout_seconds=5, logger=_quiet_logger())
        # one message an entry: a dead-letter move and a redrive then move exactly one message
        self.producer = self.client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True,
                                                    max_pending_messages=500)
        self.consumer = self.client.subscribe(
            TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100,
            properties={"letterbox.dlq.max_redeliveries": "2"})
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._produce, self._consume)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        led = self.led
        while not self.stop.is_set():
            i = led.next_i
            led.next_i += 1
            body = f"m{i}"
            extra: dict[str, Any] = {}
            if kind(i) == "delayed":
                led.due_ms[body] = int(time.time() * 1000) + DELAY_MS
                extra["deliver_after"] = __import__("datetime").timedelta(milliseconds=DELAY_MS)

            def done(res: pulsar.Result, _mid: object, body: str = body) -> None:
                if res == pulsar.Result.Ok:
                    led.receipted.add(body)
            try:
                self.producer.send_async(body_of(i), done, **extra)
            except pulsar.PulsarException:
                return
            time.sleep(0.002)

    def _consume(self) -> None:
        led = self.led
        while not self.stop.is_set():
            try:
                m = self.consumer.receive(100)
            except pulsar.PulsarException:
                continue
            body = name_of(m.data())
            now = time.time()
            mid = str(m.message_id())
            count = m.redelivery_count()
            if count < led.counts.get(mid, 0):
                led.violations.append(f"{body} ({mid}) came back with redelivery count {count} after {led.counts[mid]}")
            led.counts[mid] = max(count, led.counts.get(mid, 0))
            due = led.due_ms.get(body)
            if due is not None and now * 1000 < due - 20:
                led.violations.append(f"delayed {body} arrived {due - now * 1000:.0f} ms early")
            acked = led.acked_at.get(body)
            if acked is not None and kind(int(body[1:])) != "poison" and acked < led.last_cut - WINDOW:
                led.violations.append(f"{body} acked {led.last_cut - acked:.1f} s before the cut came back")
            if kind(int(body[1:])) == "poison":
                led.nacks += 1
                self.consumer.negative_acknowledge(m)
            else:
                led.acked_at.setdefault(body, now)
                self.consumer.acknowledge(m)

    def redrive(self) -> None:
        req = urllib.request.Request(f"{self.admin_url}/admin/v2/persistent/public/default/power-s-DLQ/letterbox/redrive",
                                     data=json.dumps({}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with contextlib.suppress(OSError):
            urllib.request.urlopen(req, timeout=10).read()
            self.led.redrives += 1

    def halt(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)
        with contextlib.suppress(Exception):
            self.client.close()


def run_cycles(root: Path, cuts: int, seed: int, report: Any = None) -> Ledger:
    """`cuts` power cuts at random moments of the workload, the checks after each restart."""
    rng = random.Random(seed)
    rig, led = Rig(root), Ledger()
    rig.mount()
    try:
        for n in range(1, cuts + 1):
            b = rig.start_broker()
            found = check_after_restart(b.url, led) if n > 1 else {}
            w = Workload(b.url, b.admin_url, led, rng)
            run_for = rng.uniform(1.0, 3.0)
            time.sleep(run_for / 2)
            if rng.random() < 0.7:
                threading.Thread(target=w.redrive, daemon=True).start()
            time.sleep(run_for / 2)
            led.last_cut = time.time()
            rig.cut()
            w.halt()
            if report is not None:
                report(n, run_for, found, led)
            rig.mount()
        b = rig.start_broker()
        found = check_after_restart(b.url, led)
        if report is not None:
            report(cuts + 1, 0.0, found, led)
        b.stop()
    finally:
        if rig.broker is not None:
            rig.broker.kill()
        rig.unmount()
    return led
