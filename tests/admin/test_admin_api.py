"""The admin REST API against a real broker: status codes and Pulsar's JSON field names."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess

P = "/admin/v2/persistent/public/default"


@pytest.fixture
def api(broker: BrokerProcess) -> Any:
    assert broker.admin_port, broker.log()

    def do(method: str, path: str, body: str | None = None) -> tuple[int, Any]:
        return call(broker.admin_url, method, path, body)

    return do


def test_clusters(api: Any) -> None:
    assert api("GET", "/admin/v2/clusters") == (200, ["standalone"])
    status, info = api("GET", "/admin/v2/clusters/standalone")
    assert status == 200 and info["brokerServiceUrl"].startswith("pulsar://")
    status, err = api("GET", "/admin/v2/clusters/elsewhere")
    assert status == 404 and "reason" in err


def test_cluster_register_update_delete(api: Any) -> None:
    data = {"serviceUrl": "http://pulsar-east:8080", "brokerServiceUrl": "pulsar://pulsar-east:6650"}
    body = json.dumps(data)
    assert api("PUT", "/admin/v2/clusters/east", body)[0] == 204
    assert api("PUT", "/admin/v2/clusters/east", body)[0] == 409
    assert api("GET", "/admin/v2/clusters") == (200, ["standalone", "east"])
    assert api("GET", "/admin/v2/clusters/east") == (200, data)
    # a tenant may now name it
    assert api("PUT", "/admin/v2/tenants/east-t", '{"allowedClusters": ["east"]}')[0] == 204
    assert api("PUT", "/admin/v2/tenants/west-t", '{"allowedClusters": ["west"]}')[0] == 412
    assert api("POST", "/admin/v2/clusters/east", '{"serviceUrl": "http://e2:8080"}')[0] == 204
    assert api("GET", "/admin/v2/clusters/east") == (200, {"serviceUrl": "http://e2:8080"})
    status, err = api("PUT", "/admin/v2/clusters/bad", '{"serviceUrl": 5}')
    assert status == 400 and "serviceUrl" in err["reason"]
    status, err = api("PUT", "/admin/v2/clusters/bad", "{}")
    assert status == 412 and "serviceUrl" in err["reason"]
    assert api("PUT", "/admin/v2/clusters/standalone", body)[0] == 409
    assert api("DELETE", "/admin/v2/clusters/standalone")[0] == 412
    assert api("POST", "/admin/v2/clusters/nowhere", body)[0] == 404
    assert api("DELETE", "/admin/v2/tenants/east-t")[0] == 204
    assert api("DELETE", "/admin/v2/clusters/east")[0] == 204
    assert api("DELETE", "/admin/v2/clusters/east")[0] == 404
    assert api("GET", "/admin/v2/clusters") == (200, ["standalone"])


def test_health(api: Any) -> None:
    assert api("GET", "/admin/v2/brokers/health") == (200, "ok")


def test_wrong_method_is_405_with_reason(api: Any) -> None:
    status, err = api("POST", "/admin/v2/clusters")
    assert status == 405 and "reason" in err
    status, err = api("PATCH", P + "/some-topic/partitions", "3")
    assert status == 405


def test_tenants_lifecycle(api: Any) -> None:
    status, tenants = api("GET", "/admin/v2/tenants")
    assert status == 200 and "public" in tenants
    assert api("PUT", "/admin/v2/tenants/acme", '{"adminRoles": [], "allowedClusters": ["standalone"]}')[0] == 204
    assert api("PUT", "/admin/v2/tenants/acme", "{}")[0] == 409
    status, info = api("GET", "/admin/v2/tenants/acme")
    assert status == 200 and info["allowedClusters"] == ["standalone"]
    assert api("PUT", "/admin/v2/tenants/bad", "{nope")[0] == 400
    assert api("PUT", "/admin/v2/tenants/bad", '{"allowedClusters": ["mars"]}')[0] == 412
    assert api("GET", "/admin/v2/tenants/ghost")[0] == 404
    assert api("DELETE", "/admin/v2/tenants/ghost")[0] == 404
    # a tenant with namespaces cannot be deleted
    assert api("PUT", "/admin/v2/namespaces/acme/orders")[0] == 204
    status, err = api("DELETE", "/admin/v2/tenants/acme")
    assert status == 409 and "reason" in err
    assert api("DELETE", "/admin/v2/namespaces/acme/orders")[0] == 204
    assert api("DELETE", "/admin/v2/tenants/acme")[0] == 204
    assert "acme" not in api("GET", "/admin/v2/tenants")[1]


def test_namespaces_lifecycle(api: Any) -> None:
    status, nss = api("GET", "/admin/v2/namespaces/public")
    assert status == 200 and "public/default" in nss
    assert api("GET", "/admin/v2/namespaces/ghost")[0] == 404
    assert api("PUT", "/admin/v2/namespaces/public/ns1")[0] == 204
    assert api("PUT", "/admin/v2/namespaces/public/ns1")[0] == 409
    assert api("PUT", "/admin/v2/namespaces/ghost/ns1")[0] == 404
    assert api("GET", "/admin/v2/namespaces/public/ns1")[0] == 200
    # a namespace with topics cannot be deleted
    assert api("PUT", "/admin/v2/persistent/public/ns1/t")[0] == 204
    assert api("DELETE", "/admin/v2/namespaces/public/ns1")[0] == 409
    assert api("DELETE", "/admin/v2/persistent/public/ns1/t")[0] == 204
    assert api("DELETE", "/admin/v2/namespaces/public/ns1")[0] == 204
    assert api("DELETE", "/admin/v2/namespaces/public/ns1")[0] == 404


def test_create_and_delete_non_partitioned(api: Any) -> None:
    assert api("PUT", P + "/plain")[0] == 204
    assert api("PUT", P + "/plain")[0] == 409
    assert api("PUT", P + "/plain/partitions", "2")[0] == 409
    status, topics = api("GET", P)
    assert status == 200 and "persistent://public/default/plain" in topics
    assert api("GET", P + "/plain/partitions") == (200, {"partitions": 0, "deleted": False})
    assert api("PUT", "/admin/v2/persistent/public/nowhere/x")[0] == 404
    assert api("DELETE", P + "/plain")[0] == 204
    assert api("DELETE", P + "/plain")[0] == 404
    assert "persistent://public/default/plain" not in api("GET", P)[1]


def test_non_persistent_topic(api: Any) -> None:
    np = "/admin/v2/non-persistent/public/default"
    assert api("PUT", np + "/np1")[0] == 204
    status, topics = api("GET", np)
    assert status == 200 and topics == ["non-persistent://public/default/np1"]
    status, stats = api("GET", np + "/np1/stats")
    assert status == 200 and stats["msgInCounter"] == 0 and stats["storageSize"] == 0
    assert api("GET", np + "/np1/internalStats")[0] == 412


def test_partitioned_lifecycle(api: Any) -> None:
    assert api("PUT", P + "/parts/partitions", "3")[0] == 204
    status, err = api("PUT", P + "/parts/partitions", "3")
    assert status == 409 and "already exists" in err["reason"]
    assert api("GET", P + "/parts/partitions")[1]["partitions"] == 3
    status, names = api("GET", P + "/partitioned")
    assert status == 200 and "persistent://public/default/parts" in names
    assert api("POST", P + "/parts/partitions", "2")[0] == 422  # decrease refused, as Pulsar
    assert api("POST", P + "/parts/partitions", "5")[0] == 204
    assert api("GET", P + "/parts/partitions")[1]["partitions"] == 5
    status, stats = api("GET", P + "/parts/partitioned-stats")
    assert status == 200 and stats["metadata"] == {"partitions": 5, "deleted": False} and len(stats["partitions"]) == 5
    assert api("POST", P + "/ghost/partitions", "5")[0] == 404
    assert api("DELETE", P + "/parts")[0] == 409  # partitioned: delete through /partitions
    assert api("DELETE", P + "/parts/partitions")[0] == 204
    assert api("DELETE", P + "/parts/partitions")[0] == 404
    assert api("GET", P + "/parts/partitions")[0] == 404  # gone, as Pulsar answers


@pytest.mark.parametrize(
    ("body", "status"),
    [("-1", 406), ("0", 406), ("{x", 400), ("", 400), ('"four"', 400), ("true", 400), ("1.5", 400)],
)
def test_bad_partition_counts(api: Any, body: str, status: int) -> None:
    got, err = api("PUT", P + "/badcount/partitions", body)
    assert got == status and err["reason"]
    assert api("GET", P + "/badcount/partitions")[0] == 404  # nothing was created


def test_unknown_topic_is_404(api: Any) -> None:
    for suffix in ("/stats", "/internalStats", "/partitioned-stats", "/subscriptions"):
        status, err = api("GET", P + "/does-not-exist" + suffix)
        assert status == 404 and "reason" in err, suffix


def test_invalid_name_is_412(api: Any) -> None:
    assert api("PUT", P + "/x-partition-3/partitions", "2")[0] == 412


def test_lookup(api: Any, broker: BrokerProcess) -> None:
    status, data = api("GET", "/lookup/v2/topic/persistent/public/default/anything")
    assert status == 200
    assert data["brokerUrl"] == f"pulsar://127.0.0.1:{broker.port}"
    assert data["httpUrl"] == broker.admin_url


def test_stats_and_internal_stats_follow_traffic(api: Any, client: Any) -> None:
    topic = "persistent://public/default/stats-topic"
    consumer = client.subscribe(topic, "sub-a")
    producer = client.create_producer(topic, producer_name="p-stats")
    for i in range(10):
        producer.send(f"m{i}".encode())
    status, stats = api("GET", P + "/stats-topic/stats")
    assert status == 200
    assert stats["msgInCounter"] == 10 and stats["bytesInCounter"] > 0 and stats["storageSize"] > 0
    assert [p["producerName"] for p in stats["publishers"]] == ["p-stats"]
    sub = stats["subscriptions"]["sub-a"]
    assert sub["msgBacklog"] == 10 and sub["type"] == "Exclusive" and len(sub["consumers"]) == 1
    for field in ("unackedMessages", "msgRateRedeliver", "msgOutCounter", "msgRateOut"):
        assert field in sub
    for _ in range(4):
        consumer.acknowledge(consumer.receive(5000))
    msg = consumer.receive(5000)
    consumer.acknowledge(consumer.receive(5000))  # leave a gap: one individually deleted range
    from tests.conftest import wait_until

    assert wait_until(lambda: api("GET", P + "/stats-topic/stats")[1]["subscriptions"]["sub-a"]["msgBacklog"] == 5)
    status, internal = api("GET", P + "/stats-topic/internalStats")
    assert status == 200
    assert internal["entriesAddedCounter"] == 10 and internal["numberOfEntries"] == 10
    assert internal["totalSize"] > 0 and internal["currentLedgerSize"] == internal["totalSize"]
    cursor = internal["cursors"]["sub-a"]
    lid = internal["lastConfirmedEntry"].split(":")[0]
    assert cursor["markDeletePosition"] == f"{lid}:3"
    assert cursor["individuallyDeletedMessages"] == f"[({lid}:4..{lid}:5]]"
    assert ":" in cursor["readPosition"]
    # a busy topic is not deleted without force
    status, err = api("DELETE", P + "/stats-topic")
    assert status == 412 and "force" in err["reason"]
    del msg
    producer.close()
    consumer.close()
    assert api("DELETE", P + "/stats-topic")[0] == 204


def test_force_delete_closes_clients(api: Any, client: Any) -> None:
    topic = "persistent://public/default/forced"
    producer = client.create_producer(topic)
    producer.send(b"x")
    assert api("DELETE", P + "/forced")[0] == 412
    assert api("DELETE", P + "/forced?force=true")[0] == 204
    assert api("GET", P + "/forced/stats")[0] in (200, 404)  # the client may re-create it on reconnect
