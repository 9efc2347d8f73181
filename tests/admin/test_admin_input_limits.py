"""Admin inputs outside the documented ranges are refused with a reason, and
the broker keeps working as before (a nacked message is still redelivered)."""
from __future__ import annotations

import http.client
import json
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger

NS = "/admin/v2/namespaces/public/default"


def _post_raw(port: int, path: str, body: bytes) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    status, raw = resp.status, resp.read()
    conn.close()
    return status, json.loads(raw)


def test_backoff_out_of_range_is_refused_and_nack_still_redelivers(broker: BrokerProcess) -> None:
    base, bo = broker.admin_url, NS + "/letterbox/redeliveryBackoff"
    status, err = call(base, "POST", bo, '{"minDelayMs": 1000000000000000000000000000000}')
    assert status == 400 and "out of range" in err["reason"]
    status, err = call(base, "POST", bo, '{"minDelayMs": 864000001}')
    assert status == 412 and "minDelayMs" in err["reason"]
    status, err = call(base, "POST", bo, '{"minDelayMs": 10, "maxDelayMs": Infinity}')
    assert status == 400 and "finite" in err["reason"]
    assert call(base, "GET", bo)[0] == 204  # nothing was stored
    assert call(base, "POST", bo, '{"minDelayMs": 10, "maxDelayMs": 864000000}')[0] == 204
    assert call(base, "DELETE", bo)[0] == 204

    client = pulsar.Client(broker.url, logger=_quiet_logger())
    consumer = client.subscribe("limits-nack", "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=50)
    producer = client.create_producer("limits-nack")
    producer.send(b"again")
    consumer.negative_acknowledge(consumer.receive(timeout_millis=5000))
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == b"again" and msg.redelivery_count() == 1
    client.close()


def test_non_utf8_and_nested_bodies_are_400_on_json_endpoints(broker: BrokerProcess) -> None:
    paths = [NS + "/letterbox/redeliveryBackoff", NS + "/retention", NS + "/messageTTL",
             "/admin/v2/tenants/public", "/admin/v2/persistent/public/default/x/letterbox/purge"]
    for path in paths:
        for body, fragment in ((b'{"minDelayMs": "\xe9"}', "UTF-8"), (b"[" * 100_000, "nested deeper"),
                               (b'{"a": NaN}', "finite")):
            status, err = _post_raw(broker.admin_port, path, body)
            assert status == 400 and fragment in err["reason"], (path, status, err)


def test_hostile_names_are_refused(broker: BrokerProcess) -> None:
    base = broker.admin_url
    for path, status in (
        ("/admin/v2/tenants/a..b", 412), ("/admin/v2/tenants/a%00b", 412), ("/admin/v2/tenants/%zz", 400),
        ("/admin/v2/namespaces/public/..", 412), ("/admin/v2/namespaces/public/a%0Ab", 412),
        ("/admin/v2/persistent/public/default/t/subscription/a%00b", 412),
        ("/admin/v2/persistent/public/default/t/subscription/..", 412),
        ("/admin/v2/persistent/public/default/a%2Fb", 412),
    ):
        got, err = call(base, "PUT", path, "{}" if "subscription" not in path else None)
        assert got == status and err["reason"], (path, got, err)
    assert call(base, "GET", "/admin/v2/tenants")[1] == ["public"]
    status, err = call(base, "PUT", "/admin/v2/tenants/ok-t", '{"adminRoles": ["a\\u0000b"]}')
    assert status == 412 and "control character" in err["reason"]


def test_binary_subscribe_follows_the_same_name_rules(broker: BrokerProcess) -> None:
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        for bad in ("a..b", "..", "sub\x01x"):
            with pytest.raises(pulsar.NotAllowedError):
                client.subscribe("limits-subnames", bad)
        client.subscribe("limits-subnames", "good.sub-1").close()
    finally:
        client.close()
    status, subs = call(broker.admin_url, "GET", "/admin/v2/persistent/public/default/limits-subnames/subscriptions")
    assert status == 200 and subs == ["good.sub-1"]
