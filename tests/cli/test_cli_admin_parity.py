"""The `letterbox admin` verbs of issue 15 item 6 not exercised elsewhere, each against a
real broker with the official client showing the effect, and their bad-input errors: the
namespace max-unacked-messages-per-subscription and max-consumers-per-topic, the topic
max-consumers, max-unacked-messages-on-consumer / -on-subscription and dispatch-rate, and
the topic operations on a topic that does not exist or the wrong kind of topic."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_namespace_subscription_and_consumer_limits(broker: BrokerProcess, client: Any) -> None:
    admin(broker, "tenants", "create", "cliparity")
    ok(admin(broker, "namespaces", "create", "cliparity/ns"))
    ok(admin(broker, "namespaces", "set-max-unacked-messages-per-subscription", "cliparity/ns",
             "--max-unacked-messages-per-subscription", "9"))
    assert ok(admin(broker, "namespaces", "get-max-unacked-messages-per-subscription", "cliparity/ns")).strip() == "9"
    ok(admin(broker, "namespaces", "remove-max-unacked-messages-per-subscription", "cliparity/ns"))
    assert ok(admin(broker, "namespaces", "get-max-unacked-messages-per-subscription",
                    "cliparity/ns")).strip() == "not set"
    ok(admin(broker, "namespaces", "set-max-consumers-per-topic", "cliparity/ns", "--max-consumers-per-topic", "1"))
    client.subscribe("persistent://cliparity/ns/t", "a")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe("persistent://cliparity/ns/t", "b")
    negative = admin(broker, "namespaces", "set-max-unacked-messages-per-subscription", "cliparity/ns",
                     "--max-unacked-messages-per-subscription", "-3")
    assert negative.exit_code == 2 and "-3" in negative.stderr
    nowhere = admin(broker, "namespaces", "get-max-unacked-messages-per-subscription", "cliparity/none")
    assert nowhere.exit_code == 1 and "404" in nowhere.stderr


def test_topic_count_and_rate_verbs(broker: BrokerProcess, client: Any) -> None:
    ok(admin(broker, "topics", "create", "cli-parity"))
    topic = "persistent://public/default/cli-parity"
    ok(admin(broker, "topics", "set-max-consumers", "cli-parity", "--max-consumers", "1"))
    assert ok(admin(broker, "topics", "get-max-consumers", "cli-parity")).strip() == "1"
    client.subscribe(topic, "only")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "second")
    ok(admin(broker, "topics", "remove-max-consumers", "cli-parity"))
    client.subscribe(topic, "second").close()
    for verb in ("max-unacked-messages-on-consumer", "max-unacked-messages-on-subscription"):
        ok(admin(broker, "topics", f"set-{verb}", "cli-parity", "--max-unacked", "4"))
        assert ok_json(admin(broker, "topics", f"get-{verb}", "cli-parity", "-o", "json")) == 4
        ok(admin(broker, "topics", f"remove-{verb}", "cli-parity"))
        assert ok(admin(broker, "topics", f"get-{verb}", "cli-parity")).strip() == "not set"
    ok(admin(broker, "topics", "set-dispatch-rate", "cli-parity", "-md", "20", "-dt", "2"))
    out = ok_json(admin(broker, "topics", "get-dispatch-rate", "cli-parity", "-o", "json"))
    assert out["dispatchThrottlingRateInMsg"] == 20 and out["ratePeriodInSecond"] == 2
    ok(admin(broker, "topics", "remove-dispatch-rate", "cli-parity"))
    bad = admin(broker, "topics", "set-dispatch-rate", "cli-parity", "-dt", "0")
    assert bad.exit_code == 2 and "-dt" in bad.stderr
    bad = admin(broker, "topics", "set-max-consumers", "cli-parity", "--max-consumers", "many")
    assert bad.exit_code == 2 and "many" in bad.stderr


@pytest.mark.parametrize("verb", ["unload", "last-message-id", "trim-topic", "terminate"])
def test_topic_operations_on_a_missing_topic_say_so(broker: BrokerProcess, verb: str) -> None:
    missing = admin(broker, "topics", verb, "cli-parity-none")
    assert missing.exit_code == 1, missing.stderr
    assert "Topic persistent://public/default/cli-parity-none not found (HTTP 404)" in missing.stderr


def test_partitioned_operations_on_the_wrong_topic_say_so(broker: BrokerProcess) -> None:
    ok(admin(broker, "topics", "create", "cli-parity-plain"))
    said = "Partitioned topic persistent://public/default/cli-parity-plain does not exist (HTTP 404)"
    for args in (("partitioned-stats-internal",), ("update-partitioned-topic", "-p", "3"),
                 ("terminate-partitioned-topic",)):
        wrong = admin(broker, "topics", args[0], "cli-parity-plain", *args[1:])
        assert wrong.exit_code == 1 and said in wrong.stderr, wrong.stderr
