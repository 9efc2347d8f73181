"""Topic-level policies (.../{topic}/maxProducers, /backlogQuota, ...): a policy set on a
topic wins over the namespace's, a partitioned topic's applies to its partitions; bad input."""
from __future__ import annotations

import json
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess

NS = "/admin/v2/namespaces/tpol/ns"
T = "/admin/v2/persistent/tpol/ns"


@pytest.fixture
def api(broker: BrokerProcess) -> Any:
    call(broker.admin_url, "PUT", "/admin/v2/tenants/tpol", "{}")
    call(broker.admin_url, "PUT", NS)

    def do(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(broker.admin_url, method, path, None if body is None else json.dumps(body))

    return do


def test_topic_policy_wins_over_the_namespace(api: Any, client: Any) -> None:
    assert api("POST", NS + "/maxProducersPerTopic", 1)[0] == 204
    assert api("PUT", T + "/roomy")[0] == 204
    assert api("POST", T + "/roomy/maxProducers", 3)[0] == 204
    assert api("GET", T + "/roomy/maxProducers") == (200, 3)
    held = [client.create_producer("persistent://tpol/ns/roomy") for _ in range(3)]
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer("persistent://tpol/ns/roomy")
    client.create_producer("persistent://tpol/ns/tight")
    with pytest.raises(pulsar.ProducerBusy):  # the namespace's limit where the topic sets none
        client.create_producer("persistent://tpol/ns/tight")
    assert api("DELETE", T + "/roomy/maxProducers")[0] == 204
    assert api("GET", T + "/roomy/maxProducers")[0] == 204
    for p in held:
        p.close()


def test_partitioned_topic_backlog_quota_applies_to_partitions(api: Any, client: Any) -> None:
    assert api("PUT", T + "/parted/partitions", 2)[0] == 204
    quota = {"limitSize": 400, "policy": "producer_exception"}
    assert api("POST", T + "/parted/backlogQuota", quota)[0] == 204
    assert api("GET", T + "/parted/backlogQuotaMap") == (
        200, {"destination_storage": {"limitSize": 400, "limitTime": -1, "policy": "producer_exception"}})
    client.subscribe("persistent://tpol/ns/parted", "slow").close()
    producer = client.create_producer("persistent://tpol/ns/parted-partition-0", batching_enabled=False)
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        for _ in range(100):
            producer.send(b"q" * 100)
    status, err = api("POST", T + "/parted-partition-1/maxConsumers", 2)
    assert status == 412 and "set policies on" in err["reason"]


@pytest.mark.parametrize(("path", "body", "status"), [
    ("/nowhere/maxProducers", 2, 404),
    ("/present/maxConsumers", -2, 412),
    ("/present/dispatchRate", {"dispatchThrottlingRateInMsg": "fast"}, 400),
    ("/present/backlogQuota", {"limitSize": 5, "policy": "shrug"}, 400),
    ("/present/inactiveTopicPolicies", {"maxInactiveDurationSeconds": -1}, 412),
])
def test_bad_input(api: Any, path: str, body: Any, status: int) -> None:
    api("PUT", T + "/present")
    got, err = api("POST", T + path, body)
    assert got == status and err["reason"], err
    assert api("GET", T + "/present/backlogQuotaMap") == (200, {})
