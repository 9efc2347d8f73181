"""benchmarks/_broker.CpuSpan, the broker-CPU figure of peers.py: a process's CPU over a span
from the scheduler's per-thread nanosecond counters, falling back to /proc/<pid>/stat when a
thread that worked in the span has ended. Checked against the CPU time the child process
measured itself (time.thread_time of the busy thread); no speed is asserted."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _broker import CpuSpan, run_seconds

CHILD = r"""
import sys, threading, time

def burn(out):
    t0 = time.thread_time()
    x = 0
    while time.thread_time() - t0 < 0.3:
        x += 1
    out.append(time.thread_time() - t0)

print("READY", flush=True)
sys.stdin.readline()
out = []
if sys.argv[1] == "thread-ends":
    t = threading.Thread(target=burn, args=(out,))
    t.start()
    t.join()
else:
    burn(out)
print(f"BURNT {out[0]}", flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("mode", ["main-thread", "thread-ends"])
def test_cpu_span_counts_the_work_of_the_span(mode: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "READY"
        span = CpuSpan(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        line = child.stdout.readline().split()
        assert line[0] == "BURNT"
        burnt = float(line[1])
        measured = span.seconds()
        # the busy thread's own CPU, plus a little of the interpreter around it
        assert burnt * 0.95 <= measured <= burnt + 0.1, (burnt, measured)
        main = span.main_seconds()  # the main thread's share
        if mode == "main-thread":
            assert burnt * 0.95 <= main <= measured, (burnt, main, measured)
        else:
            assert main < burnt / 2, (burnt, main)
    finally:
        child.kill()
        child.wait()


def test_run_seconds_of_a_gone_process_is_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert run_seconds(child.pid) is None
