"""`letterbox admin clusters ...` and `letterbox admin brokers ...`, and the REST routes
GET /admin/v2/brokers/{cluster} and /admin/v2/brokers/version behind them."""
from __future__ import annotations

from letterbox import __version__
from tests.admin.helpers import call
from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def test_brokers_rest(broker: BrokerProcess) -> None:
    assert call(broker.admin_url, "GET", "/admin/v2/brokers/version") == (200, __version__)
    assert call(broker.admin_url, "GET", "/admin/v2/brokers/standalone") == (
        200, [f"127.0.0.1:{broker.admin_port}"])
    status, err = call(broker.admin_url, "GET", "/admin/v2/brokers/elsewhere")
    assert status == 404 and "does not exist" in err["reason"]
    assert call(broker.admin_url, "GET", "/admin/v2/brokers/health")[0] == 200  # still health, not a cluster


def test_cluster_and_broker_verbs(broker: BrokerProcess) -> None:
    assert ok(admin(broker, "clusters", "list")).split() == ["standalone"]
    assert ok_json(admin(broker, "clusters", "get", "standalone", "-o", "json"))["brokerServiceUrl"] == broker.url
    ok(admin(broker, "clusters", "create", "west", "--url", "http://west:8080", "--broker-url", "pulsar://west:6650"))
    assert ok(admin(broker, "clusters", "list")).split() == ["standalone", "west"]
    assert "brokerServiceUrl: pulsar://west:6650" in ok(admin(broker, "clusters", "get", "west"))
    ok(admin(broker, "clusters", "update", "west", "--url", "http://west2:8080"))
    assert ok_json(admin(broker, "clusters", "get", "west", "-o", "json")) == {"serviceUrl": "http://west2:8080"}
    again = admin(broker, "clusters", "create", "west", "--url", "http://x:1")
    assert again.exit_code == 1 and "409" in again.stderr
    no_url = admin(broker, "clusters", "create", "east")
    assert no_url.exit_code == 2 and "--url" in no_url.stderr
    own = admin(broker, "clusters", "delete", "standalone")
    assert own.exit_code == 1 and "cannot be deleted" in own.stderr
    ok(admin(broker, "clusters", "delete", "west"))
    assert ok(admin(broker, "clusters", "list")).split() == ["standalone"]
    assert ok(admin(broker, "brokers", "list", "standalone")).split() == [f"127.0.0.1:{broker.admin_port}"]
    assert ok(admin(broker, "brokers", "version")).strip() == __version__
    assert ok(admin(broker, "brokers", "healthcheck")).strip() == "ok"
    gone = admin(broker, "brokers", "list", "west")
    assert gone.exit_code == 1 and "404" in gone.stderr
