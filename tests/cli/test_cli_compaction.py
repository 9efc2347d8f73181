"""`letterbox admin topics compact / compaction-status` and the namespace compaction threshold
commands, against a real broker, with their errors."""
from __future__ import annotations

import pulsar

from tests.broker.test_compaction import produce_keyed, read_all
from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_compact_and_status(broker: BrokerProcess, client: pulsar.Client) -> None:
    latest = produce_keyed(client, "cli-compact", 200, 7, 1)
    assert "NOT_RUN" in ok(admin(broker, "topics", "compaction-status", "cli-compact"))
    assert "Compaction of persistent://public/default/cli-compact started" in ok(
        admin(broker, "topics", "compact", "cli-compact"))
    done = ok_json(admin(broker, "topics", "compaction-status", "cli-compact", "--wait", "-o", "json"))
    assert done == {"status": "SUCCESS", "lastError": ""}
    assert {m.partition_key(): m.data() for m in read_all(client, "cli-compact", compacted=True)} == latest


def test_compact_unknown_topic_says_so(broker: BrokerProcess) -> None:
    result = admin(broker, "topics", "compact", "no-such-topic")
    assert result.exit_code != 0
    assert "Topic persistent://public/default/no-such-topic not found (HTTP 404)" in result.stderr


def test_compaction_threshold_commands(broker: BrokerProcess) -> None:
    assert "not set" in ok(admin(broker, "namespaces", "get-compaction-threshold", "public/default"))
    assert "set to 10485760 bytes" in ok(admin(broker, "namespaces", "set-compaction-threshold",
                                               "public/default", "-t", "10M"))
    got = ok_json(admin(broker, "namespaces", "get-compaction-threshold", "public/default", "-o", "json"))
    assert got == {"namespace": "public/default", "compactionThreshold": 10485760}
    bad = admin(broker, "namespaces", "set-compaction-threshold", "public/default", "-t", "lots")
    assert bad.exit_code == 2 and "use bytes or 10K" in bad.stderr
    ok(admin(broker, "namespaces", "remove-compaction-threshold", "public/default"))
    assert "not set" in ok(admin(broker, "namespaces", "get-compaction-threshold", "public/default"))
