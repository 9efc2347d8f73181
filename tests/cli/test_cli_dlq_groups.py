"""`letterbox dlq groups`, `dlq export --group`, and --group on peek, purge and redrive, against a
real broker: a DLQ of two failure causes, filled through the official client."""
from __future__ import annotations

import json
from typing import Any

from letterbox.failure import fingerprint
from letterbox.message_properties import DEAD_LETTER_REASON, FAILURE_DESCRIPTION, REAL_TOPIC
from tests.cli.helpers import dlq, ok, ok_json
from tests.conftest import BrokerProcess

T = "persistent://public/default/"


def _fill(client: Any, topic: str) -> tuple[str, str]:
    """12 dead letters: 8 'row N is malformed', 4 terminated 'id X missing'; their two groups."""
    producer = client.create_producer(T + topic, batching_enabled=False)
    for i in range(12):
        props = ({DEAD_LETTER_REASON: "max-redeliveries", FAILURE_DESCRIPTION: f"row {i} is malformed"} if i < 8
                 else {DEAD_LETTER_REASON: "terminated", FAILURE_DESCRIPTION: f"id '{i}' missing"})
        producer.send(f"m{i}".encode(), properties={**props, REAL_TOPIC: T + "cli-src"})
    producer.close()
    return (fingerprint({DEAD_LETTER_REASON: "max-redeliveries", FAILURE_DESCRIPTION: "row 1 is malformed"}),
            fingerprint({DEAD_LETTER_REASON: "terminated", FAILURE_DESCRIPTION: "id 'x' missing"}))


def test_groups_export_and_group_filters(broker: BrokerProcess, client: Any) -> None:
    rows, ids = _fill(client, "cli-groups-DLQ")
    out = ok(dlq(broker, "groups", "cli-groups-DLQ"))
    assert rows in out and ids in out and "row <n> is malformed" in out and "id <q> missing" in out
    listed = ok_json(dlq(broker, "groups", "cli-groups-DLQ", "-o", "json"))
    assert [(g["fingerprint"], g["count"]) for g in listed["groups"]] == [(rows, 8), (ids, 4)]

    lines = ok(dlq(broker, "export", "cli-groups-DLQ", "--group", ids)).splitlines()
    assert sorted(json.loads(line)["payloadText"] for line in lines) == ["m10", "m11", "m8", "m9"]
    peeked = ok_json(dlq(broker, "peek", "cli-groups-DLQ", "--group", ids, "-n", "50", "-o", "json"))
    assert len(peeked) == 4

    purged = ok_json(dlq(broker, "purge", "cli-groups-DLQ", "--group", ids, "--yes", "-o", "json"))
    assert purged["purged"] == 4
    moved = ok_json(dlq(broker, "redrive", "cli-groups-DLQ", "--group", rows, "--max-messages", "3", "-o", "json"))
    assert moved["moved"] == 3 and moved["remaining"] == 5


def test_a_group_that_is_not_a_fingerprint_is_a_usage_error(broker: BrokerProcess) -> None:
    result = dlq(broker, "redrive", "cli-groups-DLQ", "--group", "timeouts")
    assert result.exit_code == 2
    assert "fingerprint" in result.stderr and "dlq groups" in result.stderr
