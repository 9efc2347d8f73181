# The five curves of benchmarks/growth.py: one function per curve that measures one point on a
# freshly started system. Topics, fan-out, backlog and message size are driven by pulsar-perf (the
# reference distribution's Java load generator, as capacity.py drives it); delayed messages by the
# official Python client, with delayed_memory.py's producer and subscription.
from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from itertools import pairwise
from typing import Any

from _broker import CpuSpan, PeakRss, cpu_seconds, memory_mb
from _capacity_run import perf
from _systems import System
from capacity import FAR_ABOVE
from delayed_memory import (
    SUB,
    TOPIC,
    mem,
    produce_delayed,
    quiet_logger,
    subscribe,
    wait_cpu_quiet,
)

NS = "persistent://public/default"
MB = 1024 * 1024  # memory_mb's MB are MiB
# pulsar-perf's log lines start with a log4j timestamp: "2026-11-29T02:10:05,856 - INFO - ..."
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3})")
CREATED = "PerformanceProducer.*Created \\d+ producers"
PRODUCED = "DONE \\(reached the maximum number"
READY = "Start receiving from"
ADDING = "Adding \\d+ consumers"
RECEIVED = "PerformanceConsumer.*-- DONE --"
SENT_TOTAL = re.compile(r"Aggregated throughput stats --- (\d+) records sent")


class Perf:
    """One pulsar-perf process with its output read as it comes: its lines, and the log4j time
    (seconds since the epoch, this machine's clock) of the first line matching a pattern."""

    def __init__(self, system: System, args: list[str]) -> None:
        self.proc = perf(system, args)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def first(self) -> float | None:
        """The log4j time of its first stamped line (the JVM is up and has read its options)."""
        return self.at("")

    def at(self, pattern: str) -> float | None:
        rx = re.compile(pattern)
        for line in list(self.lines):
            m = STAMP.match(line)
            if m and rx.search(line):
                return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S,%f").timestamp()
        return None

    def wait_for(self, pattern: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (t := self.at(pattern)) is not None:
                return t
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.1)
        raise RuntimeError(f"pulsar-perf: no {pattern!r} within {timeout:.0f} s; last lines:\n"
                           + "".join(self.lines[-15:]))

    def finish(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise RuntimeError(f"did not finish in {timeout:.0f} s; pulsar-perf's last lines:\n"
                               + "".join(self.lines[-15:])) from e
        self._reader.join(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class BrokerTrace(threading.Thread):
    """Samples the broker's RSS and CPU time every 100 ms: the peak RSS, and the CPU between two
    wall-clock times (such as two pulsar-perf log lines), interpolated between samples."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mb, self._stop_at = pid, 0.0, threading.Event()
        self.cpu: list[tuple[float, float]] = []

    def run(self) -> None:
        while True:
            cpu = cpu_seconds(self.pid)
            if cpu is None:
                return
            self.cpu.append((time.time(), cpu))
            self.peak_mb = max(self.peak_mb, memory_mb(self.pid).get("VmRSS", 0.0))
            if self._stop_at.wait(0.1):
                return

    def stop(self) -> float:
        self._stop_at.set()
        self.join()
        return round(self.peak_mb, 1)

    def cpu_at(self, t: float) -> float:
        pts = self.cpu
        if t <= pts[0][0]:
            return pts[0][1]
        for (t0, c0), (t1, c1) in pairwise(pts):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
        return pts[-1][1]

    def cpu_between(self, start: float, end: float) -> float:
        return max(self.cpu_at(end) - self.cpu_at(start), 0.0)


# At most this many messages in flight over pulsar-perf's one connection, split among its
# producers: Apache Pulsar stops reading a connection with more than 1000 publishes pending
# (maxPendingPublishRequestsPerConnection), and 4.0.8 resumed it only when the client's
# keep-alive closed the connection, 30 s later.
IN_FLIGHT = 1000


def produce_args(topic: str, n: int, size: int, topics: int = 1) -> list[str]:
    """pulsar-perf produce: n messages in all as fast as the broker takes them, batched (its
    default 1 ms window), at most IN_FLIGHT (and at most 64 MB) outstanding over all producers."""
    outstanding = max(1, min(IN_FLIGHT // topics, 64 * MB // size))
    return ["produce", "-r", str(FAR_ABOVE), "-s", str(size), "-m", str(n), "-o", str(outstanding),
            "-t", str(topics), topic]


def consume_args(topic: str, n: int, sub: str, topics: int = 1, subs: int = 1) -> list[str]:
    """pulsar-perf consume from Earliest: one Exclusive consumer per subscription and topic, every
    message acknowledged; it exits once n messages were received across all of them."""
    return ["consume", "-ss", sub, "-ns", str(subs), "-st", "Exclusive", "-sp", "Earliest", "-m", str(n),
            "-t", str(topics), topic]


def end_to_end(system: System, topic: str, n: int, size: int, timeout: float, topics: int = 1,
               subs: int = 1) -> dict[str, Any]:
    """A consumer attached to every topic (and subscription) first, then a producer: seconds from
    the producer's start of sending (its "Created N producers", once every producer exists) to
    the consumer's last receipt of n x subs messages, and to the producer's last receipt; broker
    CPU over the same span, and its peak RSS over the whole point. Creating the producers and
    the consumers is timed apart (from each JVM's first log line): create_s and subscribe_s."""
    trace = BrokerTrace(system.pid)
    trace.start()
    consumer = Perf(system, consume_args(topic, n * subs, "growth", topics, subs))
    producer: Perf | None = None
    try:
        ready = consumer.wait_for(READY, timeout)
        producer = Perf(system, produce_args(topic, n, size, topics))
        consumer.finish(timeout)
        start = producer.wait_for(CREATED, 60)
        sent = producer.wait_for(PRODUCED, 60)
        done = consumer.wait_for(RECEIVED, 1)
        launched, listening = producer.first() or start, consumer.first() or ready
    finally:
        for p in (consumer, producer):
            if p is not None:
                p.kill()
        peak = trace.stop()
    cpu_s = trace.cpu_between(start, done)
    e2e_s, pub_s = max(done - start, 1e-3), max(sent - start, 1e-3)
    return {"messages": n, "seconds": round(e2e_s, 3), "publish_msg_s": round(n / pub_s),
            "publish_mb_s": round(n * size / pub_s / 1e6, 2), "e2e_msg_s": round(n * subs / e2e_s),
            "e2e_mb_s": round(n * subs * size / e2e_s / 1e6, 2), "peak_rss_mb": peak,
            "broker_cpu_us_per_msg": round(cpu_s / (n * subs) * 1e6, 2),
            "create_s": round(start - launched, 2), "subscribe_s": round(ready - listening, 2)}


def topics_point(system: System, topics: int, a: Any) -> dict[str, Any]:
    per_topic = max(1, a.topic_messages // topics)
    r = end_to_end(system, f"{NS}/t-{uuid.uuid4().hex[:6]}", per_topic * topics, a.message_size, a.timeout,
                   topics=topics)
    return {**r, "messages_per_topic": per_topic}


def subs_point(system: System, subs: int, a: Any) -> dict[str, Any]:
    return end_to_end(system, f"{NS}/fan-{uuid.uuid4().hex[:6]}", a.fanout_messages, a.message_size, a.timeout,
                      subs=subs)


def size_point(system: System, size: int, a: Any) -> dict[str, Any]:
    n = max(a.size_min_messages, min(a.size_messages, a.size_mb * 1_000_000 // size))
    return end_to_end(system, f"{NS}/size-{uuid.uuid4().hex[:6]}", n, size, a.timeout)


def topic_stats(system: System, topic: str) -> dict[str, Any]:
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{system.admin_url}/admin/v2/{path}/stats", timeout=30) as r:
        return dict(json.load(r))


def disk_mb(system: System) -> float:
    """`du` of the system's data directory (blocks in use, as du counts them), in MB."""
    path = system.ref.data_dir if hasattr(system, "ref") else system.broker.data_dir
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) * 1024 / 1e6


def backlog_point(system: System, messages: int, a: Any) -> dict[str, Any]:
    """A retained backlog (a subscription exists, no consumer) produced batched by pulsar-perf,
    then read from Earliest by one pulsar-perf consumer: read rate from its subscribe to its last
    receipt, peak RSS and broker CPU during the read, and `du` of the data directory after
    producing per stored message (stored: the topic's msgInCounter; pulsar-perf's -m overshoots
    by what is in flight when it stops, and Pulsar's msgBacklog counts batches, not messages)."""
    import pulsar

    topic = f"{NS}/backlog-{uuid.uuid4().hex[:6]}"
    client = pulsar.Client(system.service_url, operation_timeout_seconds=60, logger=quiet_logger())
    try:
        client.subscribe(topic, "growth", consumer_type=pulsar.ConsumerType.Exclusive).close()
    finally:
        client.close()
    disk0 = disk_mb(system)
    producer = Perf(system, produce_args(topic, messages, a.message_size))
    try:
        producer.finish(a.timeout)
        start, sent = producer.wait_for(CREATED, 1), producer.wait_for(PRODUCED, 1)
    finally:
        producer.kill()
    time.sleep(2)  # pending writes and receipts settle
    stored = int(topic_stats(system, topic).get("msgInCounter") or 0)
    disk = disk_mb(system)
    rss_before = round(memory_mb(system.pid)["VmRSS"], 1)
    rss, span = PeakRss(system.pid), CpuSpan(system.pid)
    rss.start()
    consumer = Perf(system, consume_args(topic, stored, "growth"))
    try:
        consumer.finish(a.timeout)
        cpu_s = span.seconds()
        read_s = max(consumer.wait_for(RECEIVED, 1) - consumer.wait_for(ADDING, 1), 1e-3)
    finally:
        consumer.kill()
        peak = rss.stop()
    return {"messages": messages, "stored": stored, "produce_msg_s": round(messages / max(sent - start, 1e-3)),
            "disk_mb": round(disk, 1), "disk_bytes_per_msg": round(disk * 1e6 / stored, 1) if stored else None,
            "disk_growth_bytes_per_msg": round((disk - disk0) * 1e6 / stored, 1) if stored else None,
            "read_seconds": round(read_s, 3), "read_msg_s": round(stored / read_s),
            "rss_before_read_mb": rss_before, "peak_rss_mb": peak,
            "broker_cpu_us_per_msg": round(cpu_s / stored * 1e6, 2) if stored else None}


def delayed_point(system: System, messages: int, a: Any) -> dict[str, Any]:
    """delayed_memory.py's measurement on either system: a Shared consumer subscribed, then
    `messages` unbatched 100-byte messages with one deliver_at an hour ahead (official Python
    client, at most MAX_PENDING = 1000 in flight); once the topic has stored them all
    (msgInCounter), the subscription's msgDelayed has stopped changing for 5 s and the broker's
    CPU is quiet for 3 s, the RSS growth since before producing, per message produced.
    held is msgDelayed then: the messages the broker's delayed index holds. Pulsar's in-memory
    tracker stops reading once it holds delayedDeliveryFixedDelayDetectionLookahead (50,000)
    messages due in order (as here) and leaves the rest in the ledger until they are due, so
    its held can be below the messages produced; letterbox indexes every message."""
    import pulsar

    client = pulsar.Client(system.service_url, operation_timeout_seconds=120, logger=quiet_logger())
    try:
        consumer = subscribe(client)
        _quiet_cpu(system.pid, 1.0)
        before = mem(system.pid)
        t0 = time.monotonic()
        produce_s = produce_delayed(system.service_url, messages, a.message_size, a.delay_s * 1000, True)
        stored, held = _wait_held(system, messages, a.timeout)
        settled_s = time.monotonic() - t0
        quiet = _quiet_cpu(system.pid, 3.0)
        after = mem(system.pid)
        consumer.close()  # type: ignore[attr-defined]
    finally:
        client.close()
    grew = after["VmRSS_mb"] - before["VmRSS_mb"]
    return {"messages": messages, "stored": stored, "held": held, "produce_msg_s": round(messages / produce_s),
            "settled_s": round(settled_s, 1), "rss_before_mb": before["VmRSS_mb"],
            "rss_after_mb": after["VmRSS_mb"], "hwm_after_mb": after["VmHWM_mb"], "rss_growth_mb": round(grew, 1),
            "rss_bytes_per_msg": round(grew * MB / messages, 1), "cpu_quiet": quiet}


def _wait_held(system: System, messages: int, timeout: float, still_s: float = 5.0) -> tuple[int, int]:
    """Poll the topic's stats until it has stored `messages` and the subscription's msgDelayed
    has not changed for `still_s` (or reached `messages`); returns (stored, held)."""
    deadline, last, since = time.monotonic() + timeout, -1, time.monotonic()
    stored = held = 0
    while time.monotonic() < deadline:
        stats = topic_stats(system, f"{NS}/{TOPIC}")
        stored = int(stats.get("msgInCounter") or 0)
        held = int(stats.get("subscriptions", {}).get(SUB, {}).get("msgDelayed") or 0)
        if held != last:
            last, since = held, time.monotonic()
        if stored >= messages and (held >= messages or time.monotonic() - since >= still_s):
            return stored, held
        time.sleep(0.5)
    raise RuntimeError(f"not settled in {timeout:.0f} s: {stored:,} stored, {held:,} held of {messages:,}")


def _quiet_cpu(pid: int, seconds: float) -> bool:
    """delayed_memory's wait for a quiet CPU, bounded: a JVM's timers and collector may never be
    quiet enough for it, and the reading is then taken anyway (reported as cpu_quiet false)."""
    try:
        wait_cpu_quiet(pid, quiet_s=seconds, timeout=20 + seconds)
        return True
    except RuntimeError:
        return False


CURVES = {"topics": topics_point, "subs": subs_point, "backlog": backlog_point, "size": size_point,
          "delayed": delayed_point}
