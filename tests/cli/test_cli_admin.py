"""`letterbox admin ...` against a real broker: output, JSON and exit codes."""
from __future__ import annotations

import pulsar

from tests.cli.helpers import admin, ok, ok_json, run
from tests.conftest import BrokerProcess, wait_until


def test_tenants_and_namespaces_lifecycle(broker: BrokerProcess) -> None:
    assert "public" in ok(admin(broker, "tenants", "list")).split()
    assert ok(admin(broker, "tenants", "create", "acme")) == "Created tenant acme\n"
    assert "acme" in ok_json(admin(broker, "--output", "json", "tenants", "list"))
    info = ok_json(admin(broker, "tenants", "get", "acme", "-o", "json"))
    assert info["adminRoles"] == []
    assert ok_json(admin(broker, "-o", "json", "namespaces", "create", "acme/ops")) == {
        "result": "ok", "namespace": "acme/ops"}
    assert ok(admin(broker, "namespaces", "list", "acme")).split() == ["acme/ops"]
    # Deleting a tenant that still has a namespace is refused with the API's reason.
    busy = admin(broker, "tenants", "delete", "acme")
    assert busy.exit_code == 1
    assert "(HTTP 409)" in busy.stderr
    ok(admin(broker, "namespaces", "delete", "acme/ops"))
    ok(admin(broker, "tenants", "delete", "acme"))
    assert "acme" not in ok(admin(broker, "tenants", "list")).split()


def test_errors_carry_the_reason_and_status(broker: BrokerProcess) -> None:
    missing = admin(broker, "topics", "stats", "no-such-topic")
    assert missing.exit_code == 1
    assert "no-such-topic" in missing.stderr and "(HTTP 404)" in missing.stderr
    assert missing.stdout == ""
    ok(admin(broker, "topics", "create", "twice"))
    again = admin(broker, "topics", "create", "twice")
    assert again.exit_code == 1
    assert "already exists" in again.stderr and "(HTTP 409)" in again.stderr
    unknown_tenant = admin(broker, "namespaces", "list", "nobody")
    assert unknown_tenant.exit_code == 1 and "(HTTP 404)" in unknown_tenant.stderr


def test_topics_create_list_stats_delete(broker: BrokerProcess, client: pulsar.Client) -> None:
    assert ok(admin(broker, "topics", "create", "cli-plain")) == (
        "Created topic persistent://public/default/cli-plain\n")
    assert "persistent://public/default/cli-plain" in ok(admin(broker, "topics", "list", "public/default")).split()
    producer = client.create_producer("cli-plain")
    for i in range(3):
        producer.send(b"m%d" % i)
    stats = ok_json(admin(broker, "topics", "stats", "cli-plain", "-o", "json"))
    assert stats["msgInCounter"] == 3
    assert stats["publishers"][0]["producerName"] == producer.producer_name()
    human = ok(admin(broker, "topics", "stats", "cli-plain"))
    assert "topic: persistent://public/default/cli-plain" in human
    assert any(line.split() == ["msgInCounter:", "3"] for line in human.splitlines())
    internal = ok_json(admin(broker, "topics", "internal-stats", "cli-plain", "-o", "json"))
    assert internal["entriesAddedCounter"] == 3
    busy = admin(broker, "topics", "delete", "cli-plain")
    assert busy.exit_code == 1 and "(HTTP 412)" in busy.stderr
    ok(admin(broker, "topics", "delete", "cli-plain", "--force"))
    assert "persistent://public/default/cli-plain" not in ok(admin(broker, "topics", "list", "public/default"))


def test_partitioned_topic_backlog_falls_as_consume_acks(broker: BrokerProcess) -> None:
    out = ok(admin(broker, "topics", "create-partitioned-topic", "cli-parts", "-p", "4"))
    assert out == "Created partitioned topic persistent://public/default/cli-parts with 4 partitions\n"
    listed = ok(admin(broker, "topics", "list", "public/default")).split()
    assert {f"persistent://public/default/cli-parts-partition-{i}" for i in range(4)} <= set(listed)
    ok(run("consume", "cli-parts", "-s", "work", "-n", "0", "--wait", "0", "--service-url", broker.url))
    ok(run("produce", "cli-parts", "-m", "x", "-n", "8", "--service-url", broker.url))

    def backlog() -> int:
        stats = ok_json(admin(broker, "topics", "partitioned-stats", "cli-parts", "-o", "json"))
        assert stats["metadata"]["partitions"] == 4
        return int(stats["subscriptions"]["work"]["msgBacklog"])

    assert wait_until(lambda: backlog() == 8)
    ok(run("consume", "cli-parts", "-s", "work", "-n", "8", "--service-url", broker.url))
    assert wait_until(lambda: backlog() == 0)
    human = ok(admin(broker, "topics", "partitioned-stats", "cli-parts"))
    assert "partitions: 4" in human and "cli-parts-partition-3" in human
    ok(admin(broker, "topics", "delete-partitioned-topic", "cli-parts", "-f"))
