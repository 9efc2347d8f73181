"""`letterbox admin namespaces set/get/remove-backlog-quota(s), -max-producers-per-topic,
-max-consumers-per-topic, -max-unacked-messages-per-*, -delayed-delivery, -auto-topic-creation`."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_namespace_limit_verbs(broker: BrokerProcess, client: Any) -> None:
    admin(broker, "tenants", "create", "clilim")
    ok(admin(broker, "namespaces", "create", "clilim/ns"))
    ok(admin(broker, "namespaces", "set-backlog-quota", "clilim/ns", "-l", "1K", "-p", "producer_exception"))
    quotas = ok_json(admin(broker, "namespaces", "get-backlog-quotas", "clilim/ns", "-o", "json"))
    assert quotas == {"destination_storage": {"limitSize": 1024, "limitTime": -1, "policy": "producer_exception"}}
    ok(admin(broker, "namespaces", "set-backlog-quota", "clilim/ns", "-lt", "1h", "-p", "producer_exception",
             "-t", "message_age"))
    assert "message_age: limitSize=-1 limitTime=3600" in ok(admin(broker, "namespaces", "get-backlog-quotas",
                                                                     "clilim/ns"))
    ok(admin(broker, "namespaces", "remove-backlog-quota", "clilim/ns"))
    ok(admin(broker, "namespaces", "remove-backlog-quota", "clilim/ns", "-t", "message_age"))
    assert "no backlog quota" in ok(admin(broker, "namespaces", "get-backlog-quotas", "clilim/ns"))
    ok(admin(broker, "namespaces", "set-max-producers-per-topic", "clilim/ns", "--max-producers-per-topic", "1"))
    assert ok(admin(broker, "namespaces", "get-max-producers-per-topic", "clilim/ns")).strip() == "1"
    client.create_producer("persistent://clilim/ns/t")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer("persistent://clilim/ns/t")
    ok(admin(broker, "namespaces", "remove-max-producers-per-topic", "clilim/ns"))
    assert ok(admin(broker, "namespaces", "get-max-producers-per-topic", "clilim/ns")).strip() == "not set"
    ok(admin(broker, "namespaces", "set-max-unacked-messages-per-consumer", "clilim/ns",
             "--max-unacked-messages-per-consumer", "7"))
    ok(admin(broker, "namespaces", "set-delayed-delivery", "clilim/ns", "--disable"))
    assert "active=False" in ok(admin(broker, "namespaces", "get-delayed-delivery", "clilim/ns"))
    ok(admin(broker, "namespaces", "set-auto-topic-creation", "clilim/ns", "--disable"))
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://clilim/ns/never")
    ok(admin(broker, "namespaces", "remove-auto-topic-creation", "clilim/ns"))
    client.create_producer("persistent://clilim/ns/now-allowed")
    bad = admin(broker, "namespaces", "set-backlog-quota", "clilim/ns", "-l", "lots", "-p", "producer_exception")
    assert bad.exit_code == 2 and "10M" in bad.stderr
    gone = admin(broker, "namespaces", "set-max-consumers-per-topic", "clilim/none",
                 "--max-consumers-per-topic", "2")
    assert gone.exit_code == 1 and "404" in gone.stderr


def test_dispatch_rate_and_inactive_topic_verbs(broker: BrokerProcess) -> None:
    admin(broker, "tenants", "create", "clilim")
    ok(admin(broker, "namespaces", "create", "clilim/rates"))
    ok(admin(broker, "namespaces", "set-subscription-dispatch-rate", "clilim/rates", "-md", "100"))
    out = ok_json(admin(broker, "namespaces", "get-subscription-dispatch-rate", "clilim/rates", "-o", "json"))
    assert out["dispatchThrottlingRateInMsg"] == 100 and out["ratePeriodInSecond"] == 1
    ok(admin(broker, "namespaces", "set-dispatch-rate", "clilim/rates", "-bd", "1048576", "-dt", "2"))
    assert "dispatchThrottlingRateInByte=1048576" in ok(admin(broker, "namespaces", "get-dispatch-rate",
                                                              "clilim/rates"))
    ok(admin(broker, "namespaces", "set-inactive-topic-policies", "clilim/rates", "-e", "-t", "1h",
             "-m", "delete_when_no_subscriptions"))
    assert "maxInactiveDurationSeconds=3600" in ok(admin(broker, "namespaces", "get-inactive-topic-policies",
                                                         "clilim/rates"))
    ok(admin(broker, "namespaces", "remove-inactive-topic-policies", "clilim/rates"))
    assert ok(admin(broker, "namespaces", "get-inactive-topic-policies", "clilim/rates")).strip() == "not set"
    bad = admin(broker, "namespaces", "set-inactive-topic-policies", "clilim/rates", "-t", "1h",
                "-m", "delete_when_no_subscriptions")
    assert bad.exit_code == 2 and "--enable-delete-while-inactive" in bad.stderr
