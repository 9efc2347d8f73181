"""Every Python scenario, run through the official Python client against Apache Pulsar and
letterbox at the same time (one thread each), and the two records compared."""
from __future__ import annotations

import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.conformance.compare import compare, failed_to_run
from tests.conformance.registry import load_all
from tests.conformance.targets import Target, new_prefix

SCENARIOS = load_all()


def _run(name: str, t: Target) -> tuple[bool, Any]:
    try:
        return True, SCENARIOS[name](t, new_prefix("py"))
    except Exception:
        return False, traceback.format_exc(limit=6)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_python_scenario(name: str, targets: tuple[Target, Target]) -> None:
    with ThreadPoolExecutor(2) as pool:
        pulsar_run, letterbox_run = pool.map(lambda t: _run(name, t), targets)
    for (ok, out), t in ((pulsar_run, targets[0]), (letterbox_run, targets[1])):
        if not ok:
            failed_to_run("python", name, t.name, out.strip().splitlines()[-1])
            pytest.fail(f"scenario {name} could not run against {t.name}:\n{out}")
    compare("python", name, pulsar_run[1], letterbox_run[1])
