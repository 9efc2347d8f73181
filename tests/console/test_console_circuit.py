"""The subscription view shows the circuit breaker's state (outage detection), in headless
Chromium against a real broker: `off` without a circuit policy, `open` once an operator
opened it over REST, `closed` after closing it."""
from __future__ import annotations

import pulsar

from tests.conftest import BrokerProcess
from tests.console.browser import Browser
from tests.console.test_console_dead_letters import new_topic, open_page
from tests.security.http import call


def test_subscription_view_shows_the_circuit_state(page: Browser, broker: BrokerProcess,
                                                   client: pulsar.Client) -> None:
    topic = new_topic("circuit")
    client.subscribe(topic, "guarded", consumer_type=pulsar.ConsumerType.Shared,
                     properties={"letterbox.circuit.enabled": "true"})
    client.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
    path = "/admin/v2/" + topic.replace("://", "/") + "/subscription/guarded/letterbox/circuit"
    status, _, _ = call(broker.admin_url, "POST", path, {"state": "open"})
    assert status == 200
    name = topic.rsplit("/", 1)[1]
    open_page(page, broker, f"#/sub/public/default/{name}/guarded")
    page.wait_text("#sub-circuit", "open")
    open_page(page, broker, f"#/sub/public/default/{name}/plain")
    page.wait_text("#sub-circuit", "off")
    status, _, _ = call(broker.admin_url, "POST", path, {"state": "closed"})
    assert status == 200
    open_page(page, broker, f"#/sub/public/default/{name}/guarded")
    page.wait_text("#sub-circuit", "closed")
