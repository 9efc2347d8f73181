"""`letterbox admin topics set-/get-/remove-<policy> TOPIC`: topic-level policies."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_topic_policy_verbs(broker: BrokerProcess, client: Any) -> None:
    ok(admin(broker, "topics", "create", "cli-tpol"))
    ok(admin(broker, "topics", "set-max-producers", "cli-tpol", "--max-producers", "1"))
    assert ok(admin(broker, "topics", "get-max-producers", "cli-tpol")).strip() == "1"
    client.create_producer("persistent://public/default/cli-tpol")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer("persistent://public/default/cli-tpol")
    ok(admin(broker, "topics", "remove-max-producers", "cli-tpol"))
    assert ok(admin(broker, "topics", "get-max-producers", "cli-tpol")).strip() == "not set"
    ok(admin(broker, "topics", "set-backlog-quota", "cli-tpol", "-l", "2M", "-p", "producer_request_hold"))
    quotas = ok_json(admin(broker, "topics", "get-backlog-quotas", "cli-tpol", "-o", "json"))
    assert quotas["destination_storage"]["limitSize"] == 2 * 1024 * 1024
    ok(admin(broker, "topics", "remove-backlog-quota", "cli-tpol"))
    ok(admin(broker, "topics", "set-subscription-dispatch-rate", "cli-tpol", "-md", "50"))
    assert "dispatchThrottlingRateInMsg=50" in ok(admin(broker, "topics", "get-subscription-dispatch-rate",
                                                        "cli-tpol"))
    ok(admin(broker, "topics", "set-delayed-delivery", "cli-tpol", "--disable"))
    ok(admin(broker, "topics", "set-inactive-topic-policies", "cli-tpol", "-e", "-t", "10m",
             "-m", "delete_when_no_subscriptions"))
    missing = admin(broker, "topics", "set-max-consumers", "cli-none", "--max-consumers", "2")
    assert missing.exit_code == 1 and "404" in missing.stderr
