"""The verdict of one scenario: identical on both brokers, a listed deliberate difference, or a
failure. Every verdict is kept for the results table (conformance/table.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conformance.deliberate import DELIBERATE
from tests.conformance.records import diff

RESULTS = Path(__file__).resolve().parents[2] / "build" / "conformance" / "results.jsonl"


def record_verdict(client: str, scenario: str, verdict: str, detail: str = "") -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps({"client": client, "scenario": scenario, "verdict": verdict,
                            "detail": detail}) + "\n")


def compare(client: str, scenario: str, pulsar_rec: Any, letterbox_rec: Any) -> None:
    """Assert the records are identical, or differ exactly as DELIBERATE says."""
    known = DELIBERATE.get((client, scenario))
    if known is None:
        problems = diff(pulsar_rec, letterbox_rec)
        record_verdict(client, scenario, "identical" if not problems else "differs", "; ".join(problems[:5]))
        assert not problems, ("letterbox differs from Apache Pulsar (left: Pulsar, right: letterbox):\n"
                              + "\n".join(problems))
        return
    problems = diff(known.pulsar, pulsar_rec) + diff(known.letterbox, letterbox_rec)
    record_verdict(client, scenario, "deliberate" if not problems else "differs", known.anchor)
    assert not problems, ("a deliberate difference changed (left: pinned, right: now):\n" + "\n".join(problems))


def failed_to_run(client: str, scenario: str, broker: str, error: str) -> None:
    record_verdict(client, scenario, "error", f"{broker}: {error}")
