"""Subscription endpoints: create at a position, delete, skip, skip_all, reset cursor, expire."""
from __future__ import annotations

import time
from typing import Any

import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.admin.helpers import call
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess, wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


@pytest.fixture
def api(broker: BrokerProcess) -> Any:
    def do(method: str, path: str, body: str | None = None) -> tuple[int, Any]:
        return call(broker.admin_url, method, path, body)

    return do


@pytest.fixture
def keep(api: Any) -> str:
    """A namespace that retains acknowledged messages (a reset can replay them)."""
    status, _ = api("PUT", "/admin/v2/namespaces/public/keep")
    assert status in (204, 409)
    body = '{"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}'
    assert api("POST", "/admin/v2/namespaces/public/keep/retention", body)[0] == 204
    return "keep"


def _produce(client: Any, topic: str, n: int, prefix: str = "m") -> list[Any]:
    producer = client.create_producer(topic if "://" in topic else T + topic, batching_enabled=False)
    ids = [producer.send(f"{prefix}{i}".encode(), partition_key=f"k{i}") for i in range(n)]
    producer.close()
    return ids


def _backlog(api: Any, topic: str, sub: str, base: str = P) -> int:
    status, stats = api("GET", f"{base}/{topic}/stats")
    assert status == 200, stats
    return int(stats["subscriptions"][sub]["msgBacklog"])


def _receive_all(consumer: Any, timeout_ms: int = 1500) -> list[bytes]:
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            return out
        out.append(msg.data())
        consumer.acknowledge(msg)


def test_create_subscription_positions_and_conflicts(api: Any, client: Any) -> None:
    assert api("PUT", P + "/subpos")[0] == 204
    _produce(client, "subpos", 5)
    assert api("PUT", P + "/subpos/subscription/late")[0] == 204  # default: latest
    assert api("PUT", P + "/subpos/subscription/early", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    status, err = api("PUT", P + "/subpos/subscription/early")
    assert status == 409 and "reason" in err
    assert _backlog(api, "subpos", "late") == 0
    assert _backlog(api, "subpos", "early") == 5
    assert sorted(api("GET", P + "/subpos/subscriptions")[1]) == ["early", "late"]
    assert api("PUT", P + "/no-such-topic/subscription/s")[0] == 204  # auto-creates the topic, as Pulsar
    assert api("GET", P + "/no-such-topic/subscriptions")[1] == ["s"]
    assert api("PUT", P + "/subpos/subscription/bad", "{oops")[0] == 400
    assert api("PUT", P + "/subpos/subscription/bad", '{"ledgerId": "x", "entryId": 0}')[0] == 400


def test_create_subscription_at_message_id(api: Any, client: Any) -> None:
    assert api("PUT", P + "/subid")[0] == 204
    ids = _produce(client, "subid", 6)
    mid = ids[2]
    body = f'{{"ledgerId": {mid.ledger_id()}, "entryId": {mid.entry_id()}}}'
    assert api("PUT", P + "/subid/subscription/from2", body)[0] == 204
    assert _backlog(api, "subid", "from2") == 4
    consumer = client.subscribe(T + "subid", "from2")
    assert _receive_all(consumer) == [b"m2", b"m3", b"m4", b"m5"]
    consumer.close()


def test_delete_subscription_busy_and_force(api: Any, broker: BrokerProcess) -> None:
    # a raw consumer: the official client's would subscribe again once the forced delete
    # closes it (re-creating the subscription), racing the listing below
    raw = RawConn(broker.port)
    try:
        raw.handshake()
        raw.send(client_commands.subscribe(T + "subdel", "busy", 1, 1))
        raw.expect(pb.BaseCommand.SUCCESS)
        status, err = api("DELETE", P + "/subdel/subscription/busy")
        assert status == 412 and "consumers" in err["reason"]
        assert api("DELETE", P + "/subdel/subscription/busy?force=true")[0] == 204
        assert "busy" not in api("GET", P + "/subdel/subscriptions")[1]
        assert api("DELETE", P + "/subdel/subscription/busy")[0] == 404
    finally:
        raw.close()


def test_skip_and_skip_all(api: Any, client: Any) -> None:
    assert api("PUT", P + "/skips")[0] == 204
    assert api("PUT", P + "/skips/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    _produce(client, "skips", 10)
    assert api("POST", P + "/skips/subscription/s/skip/3")[0] == 204
    assert _backlog(api, "skips", "s") == 7
    status, err = api("POST", P + "/skips/subscription/s/skip/-1")
    assert status == 412 and "reason" in err
    assert api("POST", P + "/skips/subscription/s/skip/abc")[0] == 412
    assert api("POST", P + "/skips/subscription/ghost/skip/1")[0] == 404
    assert api("GET", P + "/skips/subscription/s/skip/1")[0] == 405
    # the skipped messages are not delivered to a consumer
    consumer = client.subscribe(T + "skips", "s")
    assert _receive_all(consumer) == [f"m{i}".encode() for i in range(3, 10)]
    _produce(client, "skips", 4, prefix="n")
    consumer.close()
    assert _backlog(api, "skips", "s") == 4
    assert api("POST", P + "/skips/subscription/s/skip_all")[0] == 204
    assert _backlog(api, "skips", "s") == 0


def test_skip_all_survives_restart(broker_factory: Any, tmp_path: Any) -> None:
    b = broker_factory(tmp_path / "d")
    c = pulsar.Client(b.url)
    consumer = c.subscribe(T + "persist-skip", "s")
    consumer.close()
    _produce(c, "persist-skip", 5)
    c.close()
    assert call(b.admin_url, "POST", P + "/persist-skip/subscription/s/skip/2")[0] == 204
    b.kill()
    b2 = broker_factory(tmp_path / "d")
    status, stats = call(b2.admin_url, "GET", P + "/persist-skip/stats")
    assert status == 200 and stats["subscriptions"]["s"]["msgBacklog"] == 3


K = "/admin/v2/persistent/public/keep"
KT = "persistent://public/keep/"


def test_reset_cursor_to_time_redelivers_to_connected_consumer(api: Any, client: Any, keep: str) -> None:
    consumer = client.subscribe(KT + "reset-t", "s", consumer_type=pulsar.ConsumerType.Shared)
    _produce(client, KT + "reset-t", 3, prefix="a")
    time.sleep(0.01)  # the boundary needs a later publish time than the first batch
    middle = int(time.time() * 1000)
    time.sleep(0.01)
    _produce(client, KT + "reset-t", 3, prefix="b")
    assert len(_receive_all(consumer, 1000)) == 6
    assert _backlog(api, "reset-t", "s", K) == 0
    assert api("POST", f"{K}/reset-t/subscription/s/resetcursor/{middle}")[0] == 204
    assert _backlog(api, "reset-t", "s", K) == 3
    # the connected consumer was disconnected and gets the messages again
    assert sorted(_receive_all(consumer, 3000)) == [b"b0", b"b1", b"b2"]
    consumer.close()
    assert api("POST", K + "/reset-t/subscription/s/resetcursor/-5")[0] == 412


def test_reset_cursor_to_message_id(api: Any, client: Any, keep: str) -> None:
    consumer = client.subscribe(KT + "reset-m", "s")
    ids = _produce(client, KT + "reset-m", 5)
    assert len(_receive_all(consumer, 1000)) == 5
    mid = ids[1]
    body = f'{{"ledgerId": {mid.ledger_id()}, "entryId": {mid.entry_id()}, "partitionIndex": -1}}'
    assert api("POST", K + "/reset-m/subscription/s/resetcursor", body)[0] == 204
    assert _receive_all(consumer, 3000) == [b"m1", b"m2", b"m3", b"m4"]
    excluded = f'{{"ledgerId": {mid.ledger_id()}, "entryId": {mid.entry_id()}, "isExcluded": true}}'
    assert api("POST", K + "/reset-m/subscription/s/resetcursor", excluded)[0] == 204
    assert _receive_all(consumer, 3000) == [b"m2", b"m3", b"m4"]
    consumer.close()
    assert api("POST", K + "/reset-m/subscription/s/resetcursor", "[1]")[0] == 400
    assert api("POST", K + "/reset-m/subscription/s/resetcursor")[0] == 400
    assert api("POST", K + "/reset-m/subscription/ghost/resetcursor", body)[0] == 404


def test_expire_messages(api: Any, client: Any) -> None:
    assert api("PUT", P + "/expiry")[0] == 204
    for sub in ("a", "b"):
        assert api("PUT", P + f"/expiry/subscription/{sub}", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    _produce(client, "expiry", 4)
    # nothing is older than an hour
    assert api("POST", P + "/expiry/subscription/a/expireMessages/3600")[0] == 204
    assert _backlog(api, "expiry", "a") == 4
    time.sleep(0.05)
    assert api("POST", P + "/expiry/subscription/a/expireMessages/0")[0] == 204
    assert _backlog(api, "expiry", "a") == 0 and _backlog(api, "expiry", "b") == 4
    assert api("POST", P + "/expiry/all_subscription/expireMessages/0")[0] == 204
    assert wait_until(lambda: _backlog(api, "expiry", "b") == 0, 5)
    assert api("POST", P + "/expiry/subscription/a/expireMessages/-1")[0] == 412


def test_partitioned_fan_out(api: Any, client: Any) -> None:
    assert api("PUT", P + "/pfan/partitions", "3")[0] == 204
    assert api("PUT", P + "/pfan/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    producer = client.create_producer(T + "pfan", batching_enabled=False)
    for i in range(9):
        producer.send(b"x", partition_key=f"k{i}")
    producer.close()
    assert api("GET", P + "/pfan/partitioned-stats")[1]["subscriptions"]["s"]["msgBacklog"] == 9
    assert api("POST", P + "/pfan/subscription/s/skip/1")[0] == 405
    assert api("POST", P + "/pfan/subscription/s/skip_all")[0] == 204
    assert api("GET", P + "/pfan/partitioned-stats")[1]["subscriptions"]["s"]["msgBacklog"] == 0
    assert api("DELETE", P + "/pfan/subscription/s")[0] == 204
    assert api("GET", P + "/pfan/subscriptions")[1] == []
