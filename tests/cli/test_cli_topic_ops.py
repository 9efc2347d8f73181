"""`letterbox admin topics unload|terminate|terminate-partitioned-topic|last-message-id|
trim-topic|partitioned-stats-internal|update-partitioned-topic` against a real broker."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_topic_operations_through_the_cli(broker: BrokerProcess, client: Any) -> None:
    producer = client.create_producer("persistent://public/default/cli-ops", batching_enabled=False)
    mid = producer.send(b"one")
    assert ok(admin(broker, "topics", "last-message-id", "cli-ops")).strip() == f"{mid.ledger_id()}:{mid.entry_id()}:-1"
    assert "Unloaded topic" in ok(admin(broker, "topics", "unload", "cli-ops"))
    producer.send(b"two")  # reconnected after the unload
    assert ok_json(admin(broker, "topics", "trim-topic", "cli-ops", "-o", "json"))["result"] == "ok"
    out = ok_json(admin(broker, "topics", "terminate", "cli-ops", "-o", "json"))
    assert out["entryId"] == mid.entry_id() + 1
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer("persistent://public/default/cli-ops")
    # growth only, with the existing subscriptions
    ok(admin(broker, "topics", "create-partitioned-topic", "cli-parts", "-p", "1"))
    client.subscribe("persistent://public/default/cli-parts", "keep").close()
    ok(admin(broker, "topics", "update-partitioned-topic", "cli-parts", "-p", "3"))
    stats = ok_json(admin(broker, "topics", "partitioned-stats-internal", "cli-parts", "-o", "json"))
    assert stats["metadata"]["partitions"] == 3
    assert all("keep" in p["cursors"] for p in stats["partitions"].values())
    human = ok(admin(broker, "topics", "partitioned-stats-internal", "cli-parts"))
    assert "cli-parts-partition-2:" in human and "keep" in human
    shrink = admin(broker, "topics", "update-partitioned-topic", "cli-parts", "-p", "2")
    assert shrink.exit_code == 1 and "can't be less than" in shrink.stderr
    ends = ok_json(admin(broker, "topics", "terminate-partitioned-topic", "cli-parts", "-o", "json"))
    assert sorted(ends) == ["0", "1", "2"]
    missing = admin(broker, "topics", "terminate", "cli-none")
    assert missing.exit_code == 1 and "404" in missing.stderr and "not found" in missing.stderr
