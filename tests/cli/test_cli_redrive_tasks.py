"""`letterbox dlq redrive --subscription-only` (also as a --background task), `dlq redrive-status`
(progress of a task, the DLQ's task list) and `dlq redrive-cancel --task`."""
from __future__ import annotations

import json
import re
from typing import Any

from tests.admin.redrive_helpers import (
    backlog,
    dead_letter_in_s1,
    drain,
    live_dead_letters,
    two_subscriptions,
)
from tests.cli.helpers import dlq, ok, ok_json
from tests.conftest import BrokerProcess, wait_until


def test_cli_subscription_only_redrive_and_tasks(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    topic = "cli-subonly"
    queue = f"{topic}-S1-DLQ"
    two_subscriptions(base, topic)
    payloads = [f"c{i}" for i in range(5)]
    dead_letter_in_s1(base, client, topic, payloads, set(payloads))

    dry = ok(dlq(broker, "redrive", queue, "--subscription-only", "--dry-run"))
    assert "would move 5 of 5 messages" in dry and "into the subscriptions they were dead-lettered from" in dry
    bad = dlq(broker, "redrive", queue, "--subscription-only", "--to", "elsewhere")
    assert bad.exit_code == 2 and "leave out --to" in bad.stderr

    started = ok_json(dlq(broker, "redrive", queue, "--subscription-only", "--background", "--rate", "1",
                          "-o", "json"))
    tid = started["taskId"]
    assert re.fullmatch(r"[0-9a-f]{16}", tid) and started["state"] == "running"
    assert wait_until(lambda: ok_json(dlq(broker, "redrive-status", queue, tid, "-o", "json"))["moved"] >= 1, 20)
    status = ok(dlq(broker, "redrive-status", queue, tid))
    assert re.search(rf"task {tid}: running, moved [1-4], skipped 0, remaining ~[1-4], subscription-only", status), status
    assert tid in ok(dlq(broker, "redrive-status", queue))
    wrong = dlq(broker, "redrive-status", queue, "not-hex")
    assert wrong.exit_code == 1 and "16 hex digits" in wrong.stderr
    unknown = dlq(broker, "redrive-status", queue, "0123456789abcdef")
    assert unknown.exit_code == 1 and "No redrive task 0123456789abcdef" in unknown.stderr

    assert f"Cancelled redrive task {tid}" in ok(dlq(broker, "redrive-cancel", queue, "--task", tid))
    final = ok(dlq(broker, "redrive-status", queue, tid, "--follow"))
    assert f"task {tid}: cancelled" in final
    moved = int(json.loads(ok(dlq(broker, "redrive-status", queue, tid, "-o", "json")))["moved"])
    assert 1 <= moved < 5

    # the rest, inside the call; S2 never sees any of them
    rest = ok(dlq(broker, "redrive", queue, "--subscription-only"))
    assert f"Moved {5 - moved} messages" in rest and "0 matching messages remain" in rest
    assert live_dead_letters(base, queue) == []
    assert backlog(base, topic, "S2") == 5 and backlog(base, topic, "S1") == 5
    assert sorted(m.data().decode() for m in drain(client, topic, "S1")) == payloads
