# Helpers shared by the benchmark scripts: start/stop a letterbox broker on a
# free port and read a process's CPU time and memory from /proc (no psutil), its peak RSS
# sampled over a span.
from __future__ import annotations

import compileall
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
_LISTEN = re.compile(r"listening on pulsar://([\d.]+):(\d+)")
_ADMIN = re.compile(r"admin on http://([\d.]+):(\d+)")
PACKAGE = Path(__file__).resolve().parent.parent / "src" / "letterbox"


def compiled_bytecode() -> None:
    """Write the letterbox package's bytecode (__pycache__) where it is missing or stale, as
    `pip install` does for an installed package: a broker started from this source tree under
    PYTHONDONTWRITEBYTECODE would otherwise compile every module from source at each start
    (about 0.15 s on this machine kind), which no installed broker pays."""
    compileall.compile_dir(PACKAGE, quiet=1)


def cpu_seconds(pid: int, stat_file: str | None = None) -> float | None:
    """utime + stime of a process (not its children), or None once it is gone."""
    try:
        with open(stat_file or f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # fields after the ")" that closes the command name; utime/stime are fields 14 and 15
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _thread_run_seconds(pid: int, tid: int | str) -> float | None:
    """A thread's CPU time from the scheduler's nanosecond counter (schedstat, first field)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def run_seconds(pid: int) -> float | None:
    """CPU time of a process's live threads from the scheduler's nanosecond counters
    (/proc/<pid>/task/<tid>/schedstat), or None once it is gone: finer than
    cpu_seconds' clock ticks (10 ms) for spans of a tenth of a second of CPU."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    # a thread that ended meanwhile counts nothing
    return sum(_thread_run_seconds(pid, tid) or 0.0 for tid in tids)


class CpuSpan:
    """A process's CPU over a span: run_seconds' nanoseconds, unless a thread that ended
    within the span took its time with it (the clock-tick figure is then more than 20 ms
    larger), when cpu_seconds' ticks are used instead."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ticks0 = cpu_seconds(pid) or 0.0
        self.ns0 = run_seconds(pid) or 0.0
        self.main0 = _thread_run_seconds(pid, pid) or 0.0

    def main_seconds(self) -> float:
        """The main thread's share (a letterbox broker's event loop)."""
        return max((_thread_run_seconds(self.pid, self.pid) or 0.0) - self.main0, 0.0)

    def seconds(self) -> float:
        ticks = (cpu_seconds(self.pid) or self.ticks0) - self.ticks0
        ns = (run_seconds(self.pid) or self.ns0) - self.ns0
        return ticks if ticks - ns > 0.02 else ns


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """utime + stime of each thread of a process, by thread id (the main thread's is pid)."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        v = cpu_seconds(int(tid), f"/proc/{pid}/task/{tid}/stat")
        if v is not None:
            out[int(tid)] = v
    return out


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) in MB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


class PeakRss(threading.Thread):
    """Samples a process's RSS every 100 ms; `peak_mb` once stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mb, self._stop_at = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._stop_at.wait(0.1):
            try:
                self.peak_mb = max(self.peak_mb, memory_mb(self.pid).get("VmRSS", 0.0))
            except OSError:
                return

    def stop(self) -> float:
        self._stop_at.set()
        self.join()
        return round(self.peak_mb, 1)


class Broker:
    def __init__(self, data_dir: Path, sync: str = "full", log: Path | None = None, port: int = 0) -> None:
        self.data_dir = data_dir
        self.port = port  # 0: a free port, known once the broker logs it
        self.sync = sync
        self.log = log or data_dir.parent / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.startup_seconds = 0.0

    def start(self, timeout: float = 120.0) -> Broker:
        compiled_bytecode()
        cmd = [
            PYTHON, "-m", "letterbox", "standalone", "--data-dir", str(self.data_dir), "--port", str(self.port),
            "--admin-port", "0", "--bind", "127.0.0.1", "--sync", self.sync, "--log-level", "INFO",
        ]
        t0 = time.perf_counter()
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
        while time.perf_counter() - t0 < timeout:
            m = _LISTEN.search(self.log.read_text(errors="replace"))
            if m:
                self.url = f"pulsar://{m.group(1)}:{m.group(2)}"
                self.startup_seconds = time.perf_counter() - t0
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"broker did not start within {timeout}s; see {self.log}")

    def admin_url(self) -> str:
        """The started broker's admin API base URL (http://host:port), read from its log."""
        m = _ADMIN.search(self.log.read_text(errors="replace"))
        assert m, "admin port not found in the broker log"
        return f"http://{m.group(1)}:{m.group(2)}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
