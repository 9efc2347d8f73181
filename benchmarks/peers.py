"""letterbox side by side with Apache Pulsar standalone and NATS JetStream, one command:

    .venv/bin/python benchmarks/peers.py            # or: make bench-peers

Installs what is missing (Debian's nats-server with apt-get, as root; nats-py with pip; the
reference Apache Pulsar's jars from Maven Central, conformance/reference.py), then starts each
system in turn on 127.0.0.1 with a fresh temporary data directory -- Apache Pulsar standalone
(journalSyncData=true: fsync before the receipt, as the conformance harness runs it), NATS
JetStream (file storage, ephemeral port) and letterbox (`letterbox standalone`, sync=full) --
and runs each workload --runs times on it, 100-byte messages, one producer process and one
consumer process (_peers_pulsar.py / _peers_nats.py):

  W1 batched     --w1 messages, producer batching on (NATS has no batching: same as unbatched)
  W1 unbatched   --w1 messages, one entry per message
  W2 client DLQ  --w2 messages, every 10th always fails: nacked (delay 100 ms), dead-lettered
                 after 4 deliveries by the client's ConsumerDeadLetterPolicy(max_redeliver_count=3)
                 (NATS: max_deliver=4, nak(), dead letters rebuilt from the advisory)
  W2 broker DLQ  the same with the broker's policy (consumer property
                 letterbox.dlq.max_redeliveries=3; NATS: as above; Apache Pulsar has no
                 broker-side dead-lettering, so it runs only W2 client DLQ)

The clock runs from the producer's first send to the consumer's last ack (W2: until every good
message is acked and every failing one is in the dead letter topic, each once). Broker CPU is
the broker process's CPU over that span, from the scheduler's per-thread nanosecond counters
(/proc/<pid>/task/*/schedstat; _broker.CpuSpan), not /proc/<pid>/stat's 10 ms ticks; client CPU is the producer's plus the
consumer's own (getrusage, every thread) over their work; "producer busy" is the producer
process's CPU over its own span (send .. last receipt) -- near 1.0 it used a whole core, so the
client library, not the broker, set the pace. The table shows the median of the
runs for msg/s, seconds and CPU, and the worst run for dead letters, duplicates and lost;
--json prints every run. W2 producers send unbatched (every message its own entry, as
every redelivery and dead-letter move travels).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _broker import Broker, CpuSpan
from _systems import Pulsar, reference

HERE = Path(__file__).resolve().parent
NATS_PY = "nats-py>=2.6,<3"
WORKLOADS = {  # name -> (batching, failing, dlq)
    "W1 batched": ("on", False, "none"),
    "W1 unbatched": ("off", False, "none"),
    "W2 client DLQ": ("off", True, "client"),
    "W2 broker DLQ": ("off", True, "broker"),
}
_NATS_LISTEN = re.compile(r"Listening for client connections on ([\d.]+):(\d+)")


def ensure_installed(systems: list[str], install: bool) -> None:
    if "nats" not in systems:
        return
    if shutil.which("nats-server") is None:
        if not install or os.geteuid() != 0:
            sys.exit("nats-server is missing: run `apt-get install -y nats-server` as root (or drop --systems nats)")
        subprocess.run(["apt-get", "update"], check=True)
        subprocess.run(["apt-get", "install", "-y", "nats-server"], check=True)
    if importlib.util.find_spec("nats") is None:
        if not install:
            sys.exit(f"nats-py is missing: pip install '{NATS_PY}'")
        subprocess.run([sys.executable, "-m", "pip", "install", NATS_PY], check=True)


class NatsServer:
    def __init__(self, tmp: Path) -> None:
        self.store, self.log = tmp / "jetstream", tmp / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> NatsServer:
        cmd = ["nats-server", "-js", "-sd", str(self.store), "-a", "127.0.0.1", "-p", "-1"]
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _NATS_LISTEN.search(self.log.read_text(errors="replace"))
            if m and "Server is ready" in self.log.read_text(errors="replace"):
                self.url = f"nats://{m.group(1)}:{m.group(2)}"
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}; see {self.log}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nats-server did not start within {timeout}s; see {self.log}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Worker:
    """A worker process whose stdout lines (READY / DONE {...} / RESULT {...}) are queued."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=HERE)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, tag: str, timeout: float) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {tag} line within {timeout}s") from None
            if line is None:
                raise RuntimeError(f"worker exited ({self.proc.wait()}) before {tag}")
            if line == tag or line.startswith(tag + " "):
                return json.loads(line[len(tag):] or "{}")  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_once(system: str, url: str, broker_pid: int, workload: str, n: int, a: argparse.Namespace) -> dict[str, object]:
    batching, failing, dlq = WORKLOADS[workload]
    script = "_peers_nats.py" if system == "nats" else "_peers_pulsar.py"
    name = f"peers{uuid.uuid4().hex[:8]}" if system == "nats" else f"persistent://public/default/peers-{uuid.uuid4().hex[:8]}"
    common = ["--timeout", str(a.timeout), "--batching", batching, "--dlq", dlq] + (["--failing"] if failing else [])
    if system == "nats" and a.nats_nak_delay_ms:
        common += ["--nak-delay-ms", str(a.nats_nak_delay_ms)]
    consumer = Worker([sys.executable, script, "consume", url, name, str(n), *common])
    producer: Worker | None = None
    try:
        consumer.expect("READY", 120)
        broker_span = CpuSpan(broker_pid)
        producer = Worker([sys.executable, script, "produce", url, name, str(n), "--size", str(a.size), *common])
        timeout = a.timeout * 10 + 60
        try:
            done = consumer.expect("DONE", timeout)
        except (TimeoutError, RuntimeError):
            done = {}
        broker_cpu = broker_span.seconds()
        broker_main_cpu = broker_span.main_seconds()
        prod = producer.expect("DONE", timeout)
        try:
            result = consumer.expect("RESULT", 0 if consumer.proc.poll() is not None else a.timeout + 30)
        except (TimeoutError, RuntimeError):  # the consumer died or hung: a failed run, said why
            consumer.stop()
            code = consumer.proc.returncode
            why = f"consumer killed by signal {-code}" if code < 0 else f"consumer gave no result (exit {code})"
            result = {"complete": False, "failed": why, "cpu_s": float("nan"), "dead_letters": -1,
                      "duplicates": -1, "lost": -1, "good_in_dlq": -1, "deliveries": -1, "nacks": -1}
    finally:
        consumer.stop()
        if producer is not None:
            producer.stop()
    t_done = done.get("t_done")
    seconds = float(t_done) - float(prod["t_start"]) if isinstance(t_done, float) else float("nan")  # type: ignore[arg-type]
    return {
        "system": system, "workload": workload, "messages": n, "seconds": round(seconds, 3),
        # from the producer's last receipt to the clock's stop (W2: the failing messages' last rounds)
        "tail_s": round(float(t_done) - float(prod["t_end"]), 3) if isinstance(t_done, float) else float("nan"),  # type: ignore[arg-type]
        "msg_per_s": round(n / seconds) if seconds == seconds else 0,
        "broker_cpu_s": round(broker_cpu, 3), "client_cpu_s": round(float(prod["cpu_s"]) + float(result["cpu_s"]), 3),  # type: ignore[arg-type]
        "producer_cpu_s": prod["cpu_s"], "consumer_cpu_s": result["cpu_s"],
        # letterbox: the event loop's share of broker_cpu_s (the rest: storage writer and others)
        "broker_main_thread_cpu_s": round(broker_main_cpu, 3),
        # the producer process's CPU over its own send..last-receipt span: near 1.0 it used a whole
        # core (its client library is the limit), well below it waited on the broker
        "producer_busy": round(float(prod["cpu_s"]) / max(float(prod["t_end"]) - float(prod["t_start"]), 1e-9), 2),  # type: ignore[arg-type]
        "send_errors": prod["errors"], "dead_letters": result["dead_letters"], "duplicates": result["duplicates"],
        "lost": result["lost"], "good_in_dlq": result["good_in_dlq"], "complete": result["complete"],
        "deliveries": result["deliveries"], "nacks": result["nacks"], "failed": result.get("failed"),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def cpu_probe() -> float:
    """CPU seconds this process spends on a fixed pure-Python loop: the machine's pace at the
    time (a shared 2-core VM's varies by a quarter within minutes), printed with the table so
    runs taken at different times can be compared."""
    t0 = time.process_time()
    sum(range(30_000_000))
    return round(time.process_time() - t0, 3)


def run_system(system: str, a: argparse.Namespace, out: list[dict[str, object]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f"peers-{system}-"))
    server: Broker | NatsServer | Pulsar = (
        NatsServer(tmp) if system == "nats" else Pulsar(tmp) if system == "pulsar"
        else Broker(tmp / "data", log=tmp / "broker.log"))
    try:
        server.start()
        for workload in a.workloads:
            if system == "pulsar" and WORKLOADS[workload][2] == "broker":
                continue  # Apache Pulsar dead-letters only on the client
            n = a.w2 if workload.startswith("W2") else a.w1
            for run in range(a.runs):
                r = run_once(system, server.url, server.pid, workload, n, a)
                r["run"] = run + 1
                out.append(r)
                if not a.json:
                    print(f"  {system:<9} {workload:<14} run {run + 1}: {r['msg_per_s']:>7,} msg/s "
                          f"{r['seconds']:>7} s  broker CPU {r['broker_cpu_s']} s  dead {r['dead_letters']} "
                          f"dup {r['duplicates']} lost {r['lost']}  (load {r['loadavg_1m']})"
                          + (f"  FAILED: {r['failed']}" if r.get("failed") else ""), flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def summarise(runs: list[dict[str, object]], systems: list[str], workloads: list[str]) -> list[dict[str, object]]:
    rows = []
    for workload in workloads:
        for system in systems:
            every = [r for r in runs if r["system"] == system and r["workload"] == workload]
            rs = [r for r in every if not r.get("failed")] or every
            if not rs:
                continue

            def med(key: str, rs: list[dict[str, object]] = rs) -> float:
                return float(statistics.median(float(r[key]) for r in rs))  # type: ignore[arg-type]

            n = int(rs[0]["messages"])  # type: ignore[call-overload]
            rows.append({
                "workload": workload, "system": system, "messages": n, "msg_per_s": round(med("msg_per_s")),
                "seconds": round(med("seconds"), 3), "broker_cpu_s": round(med("broker_cpu_s"), 3),
                "broker_us_per_msg": round(med("broker_cpu_s") / n * 1e6, 1),
                "client_cpu_s": round(med("client_cpu_s"), 3), "producer_busy": round(med("producer_busy"), 2),
                "dead_letters": sorted({r["dead_letters"] for r in rs}),  # type: ignore[type-var]
                "duplicates": max(int(r["duplicates"]) for r in rs),  # type: ignore[call-overload]
                "lost": max(int(r["lost"]) for r in rs),  # type: ignore[call-overload]
                "failed_runs": sum(1 for r in every if r.get("failed")),
                "exact": all(r["complete"] and r["duplicates"] == 0 and r["lost"] == 0 and r["good_in_dlq"] == 0
                             and r["send_errors"] == 0 for r in every),
            })
    return rows


def table(rows: list[dict[str, object]]) -> str:
    head = ("| workload | system | msg/s | seconds | broker CPU s (µs/msg) | client CPU s | producer busy "
            "| dead letters | duplicates | lost |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        dead = "/".join(str(d) for d in r["dead_letters"])  # type: ignore[attr-defined]
        if r.get("failed_runs"):
            dead += f" ({r['failed_runs']} run(s) failed)"
        lines.append(f"| {r['workload']} | {r['system']} | {r['msg_per_s']:,} | {r['seconds']} "
                     f"| {r['broker_cpu_s']} ({r['broker_us_per_msg']}) | {r['client_cpu_s']} | {r['producer_busy']} | {dead} "
                     f"| {r['duplicates']} | {r['lost']} |")
    return "\n".join(lines)


def versus(rows: list[dict[str, object]]) -> list[str]:
    """letterbox against each other system per workload; and letterbox's broker-side W2 against
    Apache Pulsar's W2, whose only dead-lettering is the client's."""
    out = []
    by = {(r["workload"], r["system"]): r for r in rows}
    pairs = [(w, w, peer) for w in dict.fromkeys(r["workload"] for r in rows) for peer in ("pulsar", "nats")]
    pairs.append(("W2 broker DLQ", "W2 client DLQ", "pulsar"))
    for ours, theirs, peer in pairs:
        lb, other = by.get((ours, "letterbox")), by.get((theirs, peer))
        if lb is None or other is None:
            continue
        label = ours if ours == theirs else f"{ours} (letterbox) vs {theirs} ({peer})"
        out.append(f"{label}: letterbox {float(lb['msg_per_s']) / float(other['msg_per_s']):.2f} x {peer} msg/s, "  # type: ignore[arg-type]
                   f"time {float(lb['seconds']) / float(other['seconds']):.2f} x {peer}, broker CPU "  # type: ignore[arg-type]
                   f"{lb['broker_us_per_msg']} vs {other['broker_us_per_msg']} µs/msg, exact: "
                   f"{lb['exact']} / {other['exact']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="pulsar,nats,letterbox", help="comma-separated: pulsar, nats, letterbox")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated names from the list above")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--w1", type=int, default=100_000, help="messages in W1")
    ap.add_argument("--w2", type=int, default=20_000, help="messages in W2 (a multiple of 10)")
    ap.add_argument("--size", type=int, default=100, help="payload bytes")
    ap.add_argument("--timeout", type=float, default=60, help="a consumer gives up after this long without a message")
    ap.add_argument("--nats-nak-delay-ms", type=int, default=0,
                    help="W2 on NATS: nak(delay=...) like the Pulsar clients' 100 ms nack delay (default: plain nak())")
    ap.add_argument("--no-install", action="store_true", help="fail instead of installing what is missing")
    ap.add_argument("--json", action="store_true", help="print only JSON (summary rows and every run)")
    a = ap.parse_args()
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    a.workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    if bad := [s for s in systems if s not in ("pulsar", "nats", "letterbox")] + [w for w in a.workloads if w not in WORKLOADS]:
        sys.exit(f"unknown system or workload: {', '.join(bad)} (workloads: {', '.join(WORKLOADS)})")
    ensure_installed(systems, not a.no_install)
    if "pulsar" in systems:
        reference.fetch()
    load_before = os.getloadavg()
    runs: list[dict[str, object]] = []
    probes = [cpu_probe()]
    for system in systems:
        run_system(system, a, runs)
        probes.append(cpu_probe())
    rows = summarise(runs, systems, a.workloads)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()], "runs_per_system": a.runs,
            "nats_nak_delay_ms": a.nats_nak_delay_ms, "cpu_probe_s": probes}
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows, "runs": runs}))
        return
    print(f"\n{meta['date']}, {meta['nproc']} CPUs, load average before {meta['loadavg_before']} "
          f"after {meta['loadavg_after']}; median of {a.runs}; CPU probe {probes} s "
          "(before, and after each system)\n")
    print(table(rows))
    print()
    for line in versus(rows):
        print(line)


if __name__ == "__main__":
    main()
