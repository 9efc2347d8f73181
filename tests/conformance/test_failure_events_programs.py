"""The failure events topic read by the official Java and Go clients: each program's
`failure_events` scenario (letterbox only: not listed, so never run against Apache Pulsar) enables
the namespace's failure events, subscribes to the events topic, nacks one message with a reason
(announced over the admin API) until it is dead-lettered, redrives it, and prints the events it
received. Runs against letterbox alone; `make conformance-java conformance-go` builds the programs."""
from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conformance.targets import new_prefix
from tests.conformance.test_programs import PROGRAMS
from tests.conftest import BrokerProcess


def _event(kind: str, reason: str) -> dict[str, str]:
    return {"type": kind, "topic": "{p}-failure_events", "subscription": "S", "reason": reason}


FIRST = _event("nack", "db down (attempt 1)")
# the second nack: its own event when the client asks for a redelivery that then dead-letters
# (Go), folded into the dead-letter event when the nack itself dead-letters (Java)
SECOND = _event("nack", "db down (attempt 2)")
LAST = [_event("dead-letter", "max-redeliveries"), _event("redrive", "max-redeliveries")]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", sorted(PROGRAMS))
def test_program_reads_the_failure_events_in_order(client: str, broker: BrokerProcess) -> None:
    built, cmd = PROGRAMS[client]
    if not built.exists():
        pytest.skip(f"the {client} program is not built: run make conformance-{client}")
    done = subprocess.run([*cmd, "--service-url", broker.url, "--admin-url", broker.admin_url,
                           "--prefix", new_prefix(client), "--only", "failure_events"],
                          capture_output=True, text=True, timeout=150)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(lines) == 1, done.stderr[-3000:]
    line: dict[str, Any] = lines[0]
    assert "error" not in line, line
    assert line["record"] in ([FIRST, *LAST], [FIRST, SECOND, *LAST]), line["record"]
    listed = subprocess.run([*cmd, "--list"], capture_output=True, text=True, timeout=120).stdout.split()
    assert "failure_events" not in listed  # never part of the differential run against Pulsar
