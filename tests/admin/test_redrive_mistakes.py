"""Redrive and purge refuse operator mistakes before anything moves or is created;
a slow redrive holds no lock across its pauses and can be cancelled."""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

NS = "/admin/v2/namespaces/public/default"
P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def _produce(url: str, topic: str, n: int) -> None:
    client = pulsar.Client(url, logger=_quiet_logger())
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"m{i}".encode(), properties={"i": str(i)})
    client.close()


def _live(base: str, dlq_local: str) -> int:
    status, letters = call(base, "GET", f"{P}/{dlq_local}/letterbox/deadLetters?limit=10000")
    assert status == 200, letters
    return len(letters)


def _entries(base: str, local: str) -> int:
    status, stats = call(base, "GET", f"{P}/{local}/internalStats")
    return int(stats["numberOfEntries"]) if status == 200 else 0


def _subscriptions(base: str, local: str) -> list[str]:
    status, subs = call(base, "GET", f"{P}/{local}/subscriptions")
    assert status == 200, subs
    return list(subs)


@pytest.fixture(scope="module")
def dlq(broker: BrokerProcess) -> str:
    """src-s-DLQ with 300 expired dead letters (properties i=0..299)."""
    base = broker.admin_url
    assert call(base, "POST", NS + "/letterbox/deadLetterPolicy", '{"maxRedeliverCount": 5}')[0] == 204
    assert call(base, "PUT", P + "/src")[0] == 204
    assert call(base, "PUT", P + "/src/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    _produce(broker.url, T + "src", 300)
    assert call(base, "POST", P + "/src/subscription/s/expireMessages/0")[0] == 204
    assert wait_until(lambda: _live(base, "src-s-DLQ") == 300, 30)
    return "src-s-DLQ"


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"properties": []}, 400, "properties"),
        ({"properties": 0}, 400, "properties"),
        ({"properties": ""}, 400, "properties"),
        ({"properties": {"i": 1}}, 400, "properties"),
        ({"ratePerSecond": 1e-6}, 412, "ratePerSecond"),
        ({"ratePerSecond": 0.5}, 412, "ratePerSecond"),
        ({"ratePerSecond": 100_001}, 412, "ratePerSecond"),
        ({"ratePerSecond": "fast"}, 400, "ratePerSecond"),
        ({"target": T[:-1].replace("default", "nowhere") + "/t"}, 404, "nowhere"),
        ({"target": "persistent://ghost-tenant/ns/t"}, 404, "ghost-tenant/ns"),
        ({"deadLetteredAfter": 10**30}, 400, "out of range"),
    ],
)
def test_wrong_redrive_requests_move_nothing(broker: BrokerProcess, dlq: str, body: Any, status: int,
                                             fragment: str) -> None:
    base = broker.admin_url
    got, err = call(base, "POST", f"{P}/{dlq}/letterbox/redrive", json.dumps(body))
    assert got == status and fragment in err["reason"], (got, err)
    assert _live(base, dlq) == 300
    if "target" in body:  # the target topic was not created
        status, _ = call(base, "GET", "/admin/v2/" + body["target"].replace("://", "/") + "/internalStats")
        assert status == 404


def test_purge_filter_of_wrong_type_is_400(broker: BrokerProcess, dlq: str) -> None:
    base = broker.admin_url
    for bad in ('{"properties": []}', '{"properties": 0}', '{"reason": 5}'):
        status, err = call(base, "POST", f"{P}/{dlq}/letterbox/purge", bad)
        assert status == 400 and "reason" in err
    assert _live(base, dlq) == 300


def test_redrive_or_purge_of_a_plain_topic_is_412_and_creates_nothing(broker: BrokerProcess) -> None:
    base = broker.admin_url
    _produce(broker.url, T + "plain-orders", 5)
    for op in ("redrive", "purge"):
        for body in ("{}", '{"dryRun": true}'):
            status, err = call(base, "POST", f"{P}/plain-orders/letterbox/{op}", body)
            assert status == 412 and "not a dead letter topic" in err["reason"], (op, status, err)
    assert "letterbox-dlq-handled" not in _subscriptions(base, "plain-orders")
    assert _entries(base, "plain-orders") == 5
    # nothing durable was left behind on the plain topic
    assert call(base, "GET", f"{P}/plain-orders/stats")[1]["subscriptions"] == {}


def test_redrive_or_purge_of_an_empty_topic_creates_nothing(broker: BrokerProcess) -> None:
    base = broker.admin_url
    assert call(base, "PUT", P + "/empty-plain")[0] == 204
    assert call(base, "POST", P + "/empty-plain/letterbox/redrive", "{}") == (
        200, {"matched": 0, "moved": 0, "remaining": 0, "dryRun": False})
    assert call(base, "POST", P + "/empty-plain/letterbox/purge", "{}") == (200, {"purged": 0, "dryRun": False})
    assert _subscriptions(base, "empty-plain") == []
    _produce(broker.url, T + "empty-plain", 3)  # nothing retains them on its behalf
    assert call(base, "GET", P + "/empty-plain/stats")[1]["subscriptions"] == {}


def test_slow_redrive_does_not_block_purge_and_can_be_cancelled(broker: BrokerProcess, dlq: str) -> None:
    base = broker.admin_url
    before = _live(base, dlq)
    body = json.dumps({"target": T + "slow-restored", "ratePerSecond": 1})
    outcome: list[tuple[int, Any]] = []
    runner = threading.Thread(
        target=lambda: outcome.append(call(base, "POST", f"{P}/{dlq}/letterbox/redrive", body)), daemon=True)
    runner.start()
    assert wait_until(lambda: _entries(base, "slow-restored") >= 1, 20)

    # the redrive is paused between its 1-message chunks: a purge does not wait for it
    started = time.monotonic()
    status, result = call(base, "POST", f"{P}/{dlq}/letterbox/purge", json.dumps({"properties": {"i": "299"}}))
    assert status == 200 and result == {"purged": 1, "dryRun": False}
    assert time.monotonic() - started < 5
    # one redrive per DLQ at a time
    status, err = call(base, "POST", f"{P}/{dlq}/letterbox/redrive", "{}")
    assert status == 409 and "already running" in err["reason"]

    status, result = call(base, "DELETE", f"{P}/{dlq}/letterbox/redrive")
    assert status == 200 and result == {"cancelled": True}
    runner.join(15)
    assert not runner.is_alive() and outcome
    status, result = outcome[0]
    assert status == 200 and result["cancelled"] is True, result
    moved = result["moved"]
    assert 1 <= moved < 20
    assert _entries(base, "slow-restored") == moved
    assert _live(base, dlq) == before - moved - 1
    assert call(base, "DELETE", f"{P}/{dlq}/letterbox/redrive")[0] == 404
