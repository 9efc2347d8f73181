"""`letterbox perf` as a user runs it: the broker URL from LETTERBOX_SERVICE_URL,
stdout that is nothing but JSON with --json, and one line saying which URL did
not answer when no broker is there. Runs the real entry point in a subprocess,
so the pulsar client's own log would show up on the streams it writes to."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.cli.helpers import closed_port
from tests.conftest import BrokerProcess


def letterbox(*args: str, service_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    if service_url is not None:
        env["LETTERBOX_SERVICE_URL"] = service_url
    return subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_perf_produce_takes_the_service_url_from_the_environment_and_prints_only_json(
        broker: BrokerProcess) -> None:
    proc = letterbox("perf", "produce", "--topic", "perf-env", "-n", "200", "--json", service_url=broker.url)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # the whole of stdout: no client log lines around it
    assert result["role"] == "produce"
    assert result["messages"] == 200


def test_perf_consume_json_is_pure_with_service_url_flag(broker: BrokerProcess) -> None:
    produced = letterbox("perf", "produce", "-u", broker.url, "--topic", "perf-flag", "-n", "50", "--json")
    assert produced.returncode == 0, produced.stderr
    proc = letterbox("perf", "consume", "-u", broker.url, "--topic", "perf-flag", "-n", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["messages"] == 50


def test_perf_without_a_broker_says_which_url_in_one_line() -> None:
    url = f"pulsar://127.0.0.1:{closed_port()}"
    for role in ("produce", "consume"):
        proc = letterbox("perf", role, "--timeout-connect", "1", "-n", "10", "--json", service_url=url)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert f"cannot reach the letterbox broker at {url}" in lines[0]
        assert "is the broker running?" in lines[0]


def test_perf_shows_a_live_rate_on_stderr_while_it_runs(broker: BrokerProcess) -> None:
    import re

    proc = letterbox("perf", "produce", "-u", broker.url, "--topic", "perf-live", "-n", "60000", "--no-batching",
                     "--json", "--live", "--live-interval", "0.05")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["messages"] == 60000  # stdout stays pure JSON
    lines = re.findall(r"^produce: ([\d,]+) msgs, ([\d,]+) msg/s$", proc.stderr, re.M)
    assert len(lines) >= 2, proc.stderr
    counts = [int(n.replace(",", "")) for n, _ in lines]
    assert counts == sorted(counts) and 0 < counts[-1] <= 60000
    assert any(int(r.replace(",", "")) > 0 for _, r in lines)
    # not a terminal and no --live: nothing but the result
    quiet = letterbox("perf", "consume", "-u", broker.url, "--topic", "perf-live", "-n", "60000", "--json",
                      "--live-interval", "0.05")
    assert quiet.returncode == 0, quiet.stderr
    assert "msg/s" not in quiet.stderr
