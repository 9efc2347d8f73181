"""The Java and Go scenario programs (conformance/java, conformance/go), each run once against
Apache Pulsar and once against letterbox (at the same time), and their records compared scenario
by scenario. The programs keep the contract of conformance/README.md; `make conformance` builds
them first."""
from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.compare import compare, failed_to_run
from tests.conformance.targets import Target, new_prefix

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS: dict[str, tuple[Path, list[str]]] = {
    "java": (ROOT / "conformance/java/target/letterbox-conformance.jar",
             ["java", "-jar", str(ROOT / "conformance/java/target/letterbox-conformance.jar")]),
    "go": (ROOT / "build/conformance/letterbox-conformance-go", [str(ROOT / "build/conformance/letterbox-conformance-go")]),
}
RUN_TIMEOUT_S = 900


def scenario_names(client: str) -> list[str]:
    built, cmd = PROGRAMS[client]
    if not built.exists():
        return [f"<{client} program not built: run make conformance>"]
    done = subprocess.run([*cmd, "--list"], capture_output=True, text=True, timeout=120)
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return names or [f"<{client} program listed no scenario: {done.stderr.strip()[-200:]}>"]


def run_program(client: str, t: Target) -> dict[str, dict[str, Any]]:
    """scenario name -> its output line ({"record": ...} or {"error": ...})."""
    _, cmd = PROGRAMS[client]
    done = subprocess.run([*cmd, "--service-url", t.service_url, "--admin-url", t.admin_url,
                           "--prefix", new_prefix(client)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    out: dict[str, dict[str, Any]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            out[obj["scenario"]] = obj
    if done.returncode != 0 and not out:
        raise RuntimeError(f"{client} program failed against {t.name} ({done.returncode}):\n{done.stderr[-3000:]}")
    return out


_RUNS: dict[str, tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]] = {}


def runs(client: str, targets: tuple[Target, Target]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    if client not in _RUNS:
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(lambda t: run_program(client, t), targets)
        _RUNS[client] = (a, b)
    return _RUNS[client]


CASES = [(client, name) for client in PROGRAMS for name in scenario_names(client)]


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
@pytest.mark.parametrize(("client", "name"), CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_program_scenario(client: str, name: str, targets: tuple[Target, Target]) -> None:
    assert not name.startswith("<"), name
    pulsar_out, letterbox_out = runs(client, targets)
    for out, t in ((pulsar_out, targets[0]), (letterbox_out, targets[1])):
        line = out.get(name)
        if line is None or "error" in line:
            why = "no output line" if line is None else str(line["error"])
            failed_to_run(client, name, t.name, why)
            pytest.fail(f"{client} scenario {name} could not run against {t.name}: {why}")
    compare(client, name, pulsar_out[name]["record"], letterbox_out[name]["record"])
