# One capacity run, whichever load tool drives it (capacity.py: the Java pulsar-perf,
# capacity_go.py: the Go client's perf tool): the tool's consumer starts on a fresh topic and is
# waited for until it is subscribed (a producer started before would build a backlog that the
# end-to-end latency would then measure); only then do the broker's CPU span and RSS sampling
# start, and the producer with them. Both tools report every 10 s; the first report (JIT warm-up,
# connection set-up) is dropped and the rest come back as numbers, one dict per report.
#
# What differs between the tools is a LoadTool: how a process is launched, how a run ends (the
# Java tool stops at its -time, the Go tool runs until signalled), how its reports read and how
# many messages it sent. Invariant: neither tool's process outlives measure(), whatever fails.
from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from _broker import CpuSpan, PeakRss
from _systems import System

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from conformance import reference  # noqa: E402  (the repository's own reference-broker module)

SUBSCRIPTION = "cap"
Report = dict[str, float]


class LoadTool(Protocol):
    name: str  # as named in messages: "pulsar-perf", "pulsar-perf-go"

    def launch(self, system: System, args: list[str]) -> subprocess.Popen[str]: ...

    def finish(self, producer: subprocess.Popen[str], consumer: subprocess.Popen[str],
               duration: int) -> tuple[str, str]:
        """The producer's and the consumer's output once the run of `duration` s is over."""
        ...

    def published(self, out: str) -> list[Report]:
        """The producer's reports: rate and latencies (p50_ms, p95_ms, p99_ms, p999_ms)."""
        ...

    def received(self, out: str) -> list[Report]:
        """The consumer's reports: rate (and latencies where the tool gives them)."""
        ...

    def sent(self, out: str, published: list[Report]) -> float:
        """The messages the broker's CPU span is divided by."""
        ...


@dataclass(frozen=True)
class Measured:
    published: list[Report]  # the reports after the first
    received: list[Report]
    sent: float
    cpu_s: float  # the broker's, from the producer's start to the run's end
    peak_rss_mb: float

    @property
    def cpu_us_per_msg(self) -> float:
        return round(self.cpu_s / self.sent * 1e6, 1) if self.sent else float("nan")


def median(reports: list[Report], key: str) -> float:
    return statistics.median(r[key] for r in reports) if reports else float("nan")


def measure(system: System, tool: LoadTool, consume: list[str], produce: list[str], topic: str,
            partitioned: bool, duration: int, what: str) -> Measured:
    """A run of `tool`'s `consume` and `produce` commands against `system` on `topic`; `what`
    names the run in the error raised when the tool reported nothing after its first report."""
    consumer = tool.launch(system, consume)
    producer = None
    try:
        wait_subscribed(system.admin_url, topic, partitioned, consumer, tool.name)
        span, rss = CpuSpan(system.pid), PeakRss(system.pid)
        rss.start()
        producer = tool.launch(system, produce)
        out_p, out_c = tool.finish(producer, consumer, duration)
    finally:
        for proc in (producer, consumer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    cpu_s, peak = span.seconds(), rss.stop()
    pub, rec = tool.published(out_p)[1:], tool.received(out_c)[1:]
    if not pub or not rec:
        tail = "\n".join((out_p if not pub else out_c).splitlines()[-15:])
        raise RuntimeError(f"{what}: {tool.name} reported no interval after the first:\n{tail}")
    return Measured(pub, rec, tool.sent(out_p, pub), cpu_s, peak)


def wait_subscribed(admin_url: str, topic: str, partitioned: bool, consumer: subprocess.Popen[str],
                    tool: str, timeout: float = 120.0) -> None:
    """Until the tool's consumer is attached to subscription `cap` (a JVM takes seconds to start)."""
    path = topic.replace("persistent://", "persistent/")
    url = f"{admin_url}/admin/v2/{path}/{'partitioned-stats' if partitioned else 'stats'}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if consumer.poll() is not None:
            raise RuntimeError(f"{tool} consume exited ({consumer.returncode}) before subscribing")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if json.load(r).get("subscriptions", {}).get(SUBSCRIPTION, {}).get("consumers"):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass  # the topic does not exist until the consumer's subscribe creates it
        time.sleep(0.2)
    raise TimeoutError(f"{tool} consume did not subscribe to {topic} within {timeout}s")


def perf(system: System, args: list[str]) -> subprocess.Popen[str]:
    """A pulsar-perf process against `system`, its output to a pipe."""
    cmd = reference.tool_command("pulsar-perf", args, system.service_url, system.admin_url)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _floats(m: re.Match[str]) -> list[float]:
    return [float(g.replace(",", "")) for g in m.groups()]


_NUM = r"([\d,.]+)"
_JAVA_KEYS = ("rate", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms")


def _java_line(what: str) -> re.Pattern[str]:
    return re.compile(rf"Throughput {what}: .*? ---\s+" + _NUM + r"\s+msg/s .*?Latency: mean:\s+" + _NUM
                      + r" ms - med:\s+" + _NUM + r" - 95pct:\s+" + _NUM + r" - 99pct:\s+" + _NUM
                      + r" - 99\.9pct:\s+" + _NUM)


class PulsarPerf:
    """The reference distribution's Java pulsar-perf: its commands carry their own -time, so a
    run ends when the processes exit."""

    name = "pulsar-perf"
    PRODUCED = _java_line("produced")
    RECEIVED = _java_line("received")
    TOTAL_SENT = re.compile(r"Throughput produced:\s+([\d,]+) msg")

    def launch(self, system: System, args: list[str]) -> subprocess.Popen[str]:
        return perf(system, args)

    def finish(self, producer: subprocess.Popen[str], consumer: subprocess.Popen[str],
               duration: int) -> tuple[str, str]:
        return _output(producer, duration + 60), _output(consumer, 60)

    def published(self, out: str) -> list[Report]:
        return [dict(zip(_JAVA_KEYS, _floats(m), strict=True)) for m in self.PRODUCED.finditer(out)]

    def received(self, out: str) -> list[Report]:
        return [dict(zip(_JAVA_KEYS, _floats(m), strict=True)) for m in self.RECEIVED.finditer(out)]

    def sent(self, out: str, published: list[Report]) -> float:
        totals = self.TOTAL_SENT.findall(out)
        return float(totals[-1].replace(",", "")) if totals else 0.0


def _output(proc: subprocess.Popen[str], timeout: float) -> str:
    """What a pulsar-perf process printed; one that has not exited `timeout` s after its time
    (a producer can hang closing while its pending sends drain) is killed: its 10 s reports
    so far are what it measured."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


class GoPerf:
    """The official Go client's perf tool (built to `path` by `make bench-go`): it runs until
    signalled, so a run is `duration` s of sleep, then SIGINT to the producer and the consumer."""

    name = "pulsar-perf-go"
    PUBLISHED = re.compile(r"Publish rate:\s*([\d.]+) msg/s.*?Latency ms: 50%\s*([\d.]+)\s*-95%\s*([\d.]+)"
                           r"\s*- 99%\s*([\d.]+)\s*- 99\.9%\s*([\d.]+)", re.S)
    CONSUMED = re.compile(r"Consume rate:\s*([\d.]+) msg/s")

    def __init__(self, path: Path) -> None:
        self.path = path

    def launch(self, system: System, args: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen([str(self.path), *args, "-u", system.service_url, "--metrics", "-1"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(self, producer: subprocess.Popen[str], consumer: subprocess.Popen[str],
               duration: int) -> tuple[str, str]:
        time.sleep(duration)  # the tools report every 10 s meanwhile
        out_p = _interrupt(producer)
        return out_p, _interrupt(consumer)

    def published(self, out: str) -> list[Report]:
        keys = ("rate", "p50_ms", "p95_ms", "p99_ms", "p999_ms")
        return [dict(zip(keys, _floats(m), strict=True)) for m in self.PUBLISHED.finditer(out)]

    def received(self, out: str) -> list[Report]:
        return [{"rate": float(m.group(1))} for m in self.CONSUMED.finditer(out)]

    def sent(self, out: str, published: list[Report]) -> float:
        return sum(r["rate"] for r in published) * 10  # the tool prints no total: rates of 10 s reports


def _interrupt(proc: subprocess.Popen[str]) -> str:
    """Stop a Go perf process (it runs until signalled) and return what it printed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]
