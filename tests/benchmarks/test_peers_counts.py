"""benchmarks/peers.py at a tiny size: every workload's counts are exact (every message
acked once, every failing one dead-lettered once, nothing lost) on letterbox, and on NATS
JetStream too where nats-server and nats-py are installed. Correctness only: no timing is
asserted."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
W1, W2 = 300, 100


def run_peers(systems: list[str]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--systems", ",".join(systems), "--runs", "1",
         "--w1", str(W1), "--w2", str(W2), "--timeout", "30", "--no-install", "--json"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
def test_peers_counts_are_exact() -> None:
    systems = ["letterbox"]
    if shutil.which("nats-server") and importlib.util.find_spec("nats"):
        systems.append("nats")
    report = run_peers(systems)
    runs = report["runs"]
    assert isinstance(runs, list)
    assert sorted({(r["system"], r["workload"]) for r in runs}) == sorted(
        (s, w) for s in systems for w in ("W1 batched", "W1 unbatched", "W2 client DLQ", "W2 broker DLQ"))
    for r in runs:
        failing = r["workload"].startswith("W2")
        assert r["messages"] == (W2 if failing else W1), r
        assert r["complete"] and r["send_errors"] == 0, r
        assert r["dead_letters"] == (W2 // 10 if failing else 0), r
        assert (r["duplicates"], r["lost"], r["good_in_dlq"]) == (0, 0, 0), r
        # W2: each failing message was delivered 4 times (3 redeliveries) before it was dead-lettered
        assert r["nacks"] == (4 * W2 // 10 if failing else 0), r
    assert all(row["exact"] for row in report["rows"]), report["rows"]
