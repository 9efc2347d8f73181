"""`letterbox admin` subscription, message and namespace-policy verbs against a
real broker: each verb's effect is checked through the topic's stats."""
from __future__ import annotations

import json

import pulsar

from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def _backlog(broker: BrokerProcess, topic: str, sub: str) -> int:
    stats = ok_json(admin(broker, "topics", "stats", topic, "-o", "json"))
    return int(stats["subscriptions"][sub]["msgBacklog"])


def test_subscription_verbs(broker: BrokerProcess, client: pulsar.Client) -> None:
    producer = client.create_producer("cli-subs")
    for i in range(10):
        producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}")
    ok(admin(broker, "topics", "create-subscription", "cli-subs", "-s", "audit", "-m", "earliest"))
    ok(admin(broker, "topics", "create-subscription", "cli-subs", "-s", "tail"))
    assert ok(admin(broker, "topics", "subscriptions", "cli-subs")).split() == ["audit", "tail"]
    assert _backlog(broker, "cli-subs", "audit") == 10
    assert _backlog(broker, "cli-subs", "tail") == 0

    ok(admin(broker, "topics", "skip", "cli-subs", "-s", "audit", "-n", "3"))
    assert _backlog(broker, "cli-subs", "audit") == 7
    ok(admin(broker, "topics", "clear-backlog", "cli-subs", "-s", "audit"))
    assert _backlog(broker, "cli-subs", "audit") == 0
    ok(admin(broker, "topics", "reset-cursor", "cli-subs", "-s", "audit", "-t", "1h"))
    assert _backlog(broker, "cli-subs", "audit") == 10
    ok(admin(broker, "topics", "expire-messages", "cli-subs", "-s", "audit", "-t", "0"))
    assert _backlog(broker, "cli-subs", "audit") == 0
    ok(admin(broker, "topics", "reset-cursor", "cli-subs", "-s", "audit", "-m", "earliest"))
    assert _backlog(broker, "cli-subs", "audit") == 10

    dup = admin(broker, "topics", "create-subscription", "cli-subs", "-s", "audit")
    assert dup.exit_code == 1 and "(HTTP 409)" in dup.stderr
    ok(admin(broker, "topics", "unsubscribe", "cli-subs", "-s", "tail"))
    assert ok(admin(broker, "topics", "subscriptions", "cli-subs")).split() == ["audit"]
    gone = admin(broker, "topics", "skip", "cli-subs", "-s", "tail", "-n", "1")
    assert gone.exit_code == 1 and "(HTTP 404)" in gone.stderr


def test_peek_messages_shows_payload_and_properties(broker: BrokerProcess, client: pulsar.Client) -> None:
    producer = client.create_producer("cli-peek")
    for i in range(3):
        producer.send(f"payload-{i}".encode(), properties={"n": str(i)}, partition_key=f"key-{i}")
    ok(admin(broker, "topics", "create-subscription", "cli-peek", "-s", "look", "-m", "earliest"))
    peeked = ok_json(admin(broker, "topics", "peek-messages", "cli-peek", "-s", "look", "-n", "5", "-o", "json"))
    assert [m["payload"] for m in peeked] == ["payload-0", "payload-1", "payload-2"]
    assert [m["properties"] for m in peeked] == [{"n": "0"}, {"n": "1"}, {"n": "2"}]
    assert all(m["messageId"] for m in peeked)
    human = ok(admin(broker, "topics", "peek-messages", "cli-peek", "-s", "look", "-n", "2"))
    assert "payload-0" in human and "payload-1" in human and "payload-2" not in human
    assert "Properties: n=0" in human
    # Peeking consumes nothing.
    assert _backlog(broker, "cli-peek", "look") == 3
    ledger, entry = peeked[1]["messageId"].split(":")[:2]
    one = ok_json(admin(broker, "topics", "get-message-by-id", "cli-peek", "-l", ledger, "-e", entry, "-o", "json"))
    assert one[0]["payload"] == "payload-1"
    last = ok_json(admin(broker, "topics", "examine-message", "cli-peek", "-o", "json"))
    assert last[0]["payload"] == "payload-2"


def test_namespace_policies(broker: BrokerProcess) -> None:
    ok(admin(broker, "namespaces", "create", "public/cli-policies"))
    ok(admin(broker, "namespaces", "set-deduplication", "public/cli-policies", "--enable"))
    ok(admin(broker, "namespaces", "set-retention", "public/cli-policies", "-t", "3h", "-s", "1G"))
    ok(admin(broker, "namespaces", "set-message-ttl", "public/cli-policies", "--ttl", "10m"))
    policies = ok_json(admin(broker, "namespaces", "policies", "public/cli-policies", "-o", "json"))
    assert policies["deduplicationEnabled"] is True
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 1024}
    assert policies["message_ttl_in_seconds"] == 600
    human = ok(admin(broker, "namespaces", "policies", "public/cli-policies"))
    assert ["deduplicationEnabled:", "true"] in [line.split() for line in human.splitlines()]
    assert json.loads(human.split("retention_policies:", 1)[1].splitlines()[0]) == {
        "retentionTimeInMinutes": 180, "retentionSizeInMB": 1024}
    ok(admin(broker, "namespaces", "set-deduplication", "public/cli-policies", "--disable"))
    assert ok_json(admin(broker, "namespaces", "policies", "public/cli-policies", "-o", "json"))[
        "deduplicationEnabled"] is False


def test_letterbox_namespace_policies(broker: BrokerProcess) -> None:
    ns = "public/cli-lb-policies"
    ok(admin(broker, "namespaces", "create", ns))
    ok(admin(broker, "namespaces", "set-dead-letter-policy", ns, "-c", "3", "-i", "audit"))
    ok(admin(broker, "namespaces", "set-redelivery-backoff", ns, "--min-delay-ms", "500", "--multiplier", "3"))
    policies = ok_json(admin(broker, "namespaces", "policies", ns, "-o", "json"))
    assert policies["letterbox_dead_letter_policy"]["maxRedeliverCount"] == 3
    assert policies["letterbox_dead_letter_policy"]["initialSubscriptionName"] == "audit"
    assert policies["letterbox_redelivery_backoff"]["minDelayMs"] == 500
    assert policies["letterbox_redelivery_backoff"]["multiplier"] == 3
    refused = admin(broker, "namespaces", "set-redelivery-backoff", ns, "--min-delay-ms", "1", "--multiplier", "0")
    assert refused.exit_code == 1 and "multiplier" in refused.stderr and "(HTTP 412)" in refused.stderr
    ok(admin(broker, "namespaces", "remove-policy", ns, "redelivery-backoff"))
    ok(admin(broker, "namespaces", "remove-policy", ns, "dead-letter-policy"))
    policies = ok_json(admin(broker, "namespaces", "policies", ns, "-o", "json"))
    assert "letterbox_redelivery_backoff" not in policies or policies["letterbox_redelivery_backoff"] is None
    assert "letterbox_dead_letter_policy" not in policies or policies["letterbox_dead_letter_policy"] is None
