"""The atomic move extension: .../subscription/{sub}/letterbox/move."""
from __future__ import annotations

import json
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


@pytest.fixture
def api(broker: BrokerProcess) -> Any:
    def do(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(broker.admin_url, method, path, None if body is None else
                    body if isinstance(body, str) else json.dumps(body))

    return do


def _mid(msg: pulsar.Message) -> str:
    m = msg.message_id()
    return f"{m.ledger_id()}:{m.entry_id()}:{m.partition()}:{m.batch_index()}"


def test_move_is_atomic_and_idempotent(api: Any, client: pulsar.Client) -> None:
    consumer = client.subscribe(T + "mv-src", "s", consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer(T + "mv-src").send(b"x", partition_key="k", properties={"a": "1"})
    msg = consumer.receive(5000)
    body = {"messageId": _mid(msg), "target": T + "mv-dst", "properties": {"b": "2"},
            "deadLetterReason": "terminated", "description": "bad", "initialSubscription": "ops"}
    status, answer = api("POST", P + "/mv-src/subscription/s/letterbox/move", body)
    assert status == 200 and answer["moved"] is True and answer["messageId"]
    # asked again (a lost response, a second consumer): nothing more is moved
    assert api("POST", P + "/mv-src/subscription/s/letterbox/move", body) == (200, {"moved": False, "messageId": None})
    status, stats = api("GET", P + "/mv-src/stats")
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    ops = client.subscribe(T + "mv-dst", "ops")
    moved = ops.receive(5000)
    props = moved.properties()
    assert moved.data() == b"x" and moved.partition_key() == "k"
    assert props["a"] == "1" and props["b"] == "2"
    assert props["DEAD_LETTER_REASON"] == "terminated" and props["DEAD_LETTER_DESCRIPTION"] == "bad"
    assert props["DEAD_LETTER_SUBSCRIPTION"] == "s" and props["DELIVERY_COUNT"] == "1"
    assert props["REAL_TOPIC"] == T + "mv-src" and props["ORIGIN_MESSAGE_ID"] == _mid(msg)
    with pytest.raises(pulsar.Timeout):
        ops.receive(500)
    consumer.close()
    ops.close()


def test_move_errors(api: Any, client: pulsar.Client) -> None:
    consumer = client.subscribe(T + "mv-err", "s")
    client.create_producer(T + "mv-err").send(b"x")
    msg = consumer.receive(5000)
    path = P + "/mv-err/subscription/s/letterbox/move"
    good = {"messageId": _mid(msg), "target": T + "mv-err-dst"}
    cases: list[tuple[str, Any, int, str]] = [
        (P + "/no-such-topic/subscription/s/letterbox/move", good, 404, "not found"),
        (P + "/mv-err/subscription/nobody/letterbox/move", good, 404, "Subscription"),
        (path, "{not json", 400, "Malformed JSON"),
        (path, [1, 2], 400, "JSON object"),
        (path, {"target": T + "x"}, 400, "messageId"),
        (path, {"messageId": "a:b", "target": T + "x"}, 400, "messageId"),
        (path, {"messageId": _mid(msg)}, 400, "target"),
        (path, {**good, "properties": {"k": 1}}, 400, "properties"),
        (path, {**good, "deliverAfterMs": -5}, 400, "deliverAfterMs"),
        (path, {**good, "deadLetterReason": "oops\nmy own words"}, 400, "deadLetterReason must be one of"),
        (path, {**good, "deliverAfterMs": 864_000_001}, 412, "deliverAfterMs"),
        (path, {**good, "target": "non-persistent://public/default/np"}, 412, "persistent"),
        (path, {**good, "target": "persistent://tenant-only"}, 412, "invalid topic name"),
        (path, {**good, "messageId": "99:0:-1:-1"}, 404, "not on"),
        (path, {**good, "messageId": f"{msg.message_id().ledger_id()}:999:-1:-1"}, 404, "does not exist"),
        (path, {**good, "messageId": _mid(msg).rsplit(":", 1)[0] + ":3"}, 412, "batch index"),
    ]
    for url, body, status, reason in cases:
        got, err = api("POST", url, body)
        assert got == status, (body, got, err)
        assert reason in err["reason"], (body, err)
    assert api("GET", path)[0] == 405
    # none of that touched the message: it is still there to move
    assert api("POST", path, good)[1]["moved"] is True
    consumer.close()
