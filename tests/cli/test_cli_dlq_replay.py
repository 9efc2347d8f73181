"""`letterbox dlq replay`: edit-and-replay from the CLI against a real broker -- a JSON patch on one
group, a property set on one message, the dry run that checks the edit, and usage errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from letterbox.failure import fingerprint
from letterbox.message_properties import (
    DEAD_LETTER_REASON,
    EDIT_LOG,
    FAILURE_DESCRIPTION,
    REAL_TOPIC,
)
from tests.cli.helpers import dlq, ok, ok_json
from tests.conftest import BrokerProcess

T = "persistent://public/default/"


def test_replay_a_group_with_a_json_patch(broker: BrokerProcess, client: Any, tmp_path: Path) -> None:
    consumer = client.subscribe(T + "replay-src", "check")
    producer = client.create_producer(T + "replay-src-DLQ", batching_enabled=False)
    for i in range(3):
        producer.send(json.dumps({"n": i, "amount": "x"}).encode(), properties={
            DEAD_LETTER_REASON: "terminated", FAILURE_DESCRIPTION: f"bad amount in row {i}", REAL_TOPIC: T + "replay-src"})
    producer.close()
    group = fingerprint({DEAD_LETTER_REASON: "terminated", FAILURE_DESCRIPTION: "bad amount in row 0"})
    patch = tmp_path / "patch.json"
    patch.write_text('[{"op": "replace", "path": "/amount", "value": 1}]')
    checked = ok_json(dlq(broker, "replay", "replay-src-DLQ", "--group", group, "--json-patch", f"@{patch}",
                          "--dry-run", "-o", "json"))
    assert checked["matched"] == 3 and checked["moved"] == 0
    out = ok(dlq(broker, "replay", "replay-src-DLQ", "--group", group, "--json-patch", f"@{patch}",
                 "--set-property", "fixed=yes"))
    assert "Replayed 3 edited dead letters" in out
    got = []
    for _ in range(3):
        msg = consumer.receive(timeout_millis=5_000)
        got.append(json.loads(msg.data()))
        assert msg.properties()["fixed"] == "yes" and json.loads(msg.properties()[EDIT_LOG])[0]["changes"] == [
            "jsonPatch:1", "set:fixed"]
        consumer.acknowledge(msg)
    assert sorted(g["n"] for g in got) == [0, 1, 2] and {g["amount"] for g in got} == {1}
    consumer.close()


def test_replay_refusals(broker: BrokerProcess, client: Any) -> None:
    producer = client.create_producer(T + "replay-bad-DLQ", batching_enabled=False)
    mid = producer.send(b"not json", properties={DEAD_LETTER_REASON: "terminated", REAL_TOPIC: T + "replay-bad"})
    producer.close()
    msg_id = f"{mid.ledger_id()}:{mid.entry_id()}:-1:-1"
    for args, needle in ((["--json-patch", "[]"], "--message-id"),
                         (["--message-id", msg_id], "nothing to change"),
                         (["--message-id", msg_id, "--json-patch", "{oops"], "not JSON")):
        result = dlq(broker, "replay", "replay-bad-DLQ", *args)
        assert result.exit_code == 2 and needle in result.stderr, (args, result.stderr)
    result = dlq(broker, "replay", "replay-bad-DLQ", "--message-id", msg_id,
                 "--json-patch", '[{"op": "add", "path": "/a", "value": 1}]')
    assert result.exit_code != 0 and "no JSON payload" in result.stderr, result.stderr
