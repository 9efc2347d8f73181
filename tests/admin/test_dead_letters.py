"""Dead-letter operations (letterbox extensions): list, peek, redrive, purge; the redrive acceptance test."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

NS = "/admin/v2/namespaces/public/default"
P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def _dlq_summary(base: str, topic: str, ns: str = NS) -> dict[str, Any]:
    status, topics = call(base, "GET", ns + "/letterbox/deadLetterTopics")
    assert status == 200, topics
    found = [t for t in topics if t["topic"] == topic]
    return found[0] if found else {"messages": 0, "byReason": {}, "sourceTopics": {}}


def _produce(client: Any, topic: str, start: int, n: int, batch: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(start, start + n):
        producer.send(f"p{i}".encode(), partition_key=f"k{i}", properties={"batch": batch, "i": str(i)})
    producer.close()


def _dead_letter_500(broker: BrokerProcess, client: Any) -> str:
    """250 messages dead-lettered for max redeliveries (consumer properties), 250 expired."""
    base = broker.admin_url
    topic, dlq = T + "orders", T + "orders-sub-DLQ"
    consumer = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=20,
        properties={"letterbox.dlq.max_redeliveries": "1"},
    )
    _produce(client, topic, 0, 250, "A")

    def nack_some() -> bool:
        for _ in range(100):
            try:
                consumer.negative_acknowledge(consumer.receive(timeout_millis=50))
            except pulsar.Timeout:
                break
        return _dlq_summary(base, dlq)["messages"] >= 250

    assert wait_until(nack_some, 60, 0), _dlq_summary(base, dlq)
    consumer.close()
    _produce(client, topic, 250, 250, "B")
    # expired: the subscription's dead-letter policy (set by its consumer) applies to expiry too
    assert call(base, "POST", P + "/orders/subscription/sub/expireMessages/0")[0] == 204
    return dlq


def test_redrive_one_reason_keeps_keys_and_properties(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    dlq = _dead_letter_500(broker, client)
    summary = _dlq_summary(base, dlq)
    assert summary["messages"] == 500
    assert summary["byReason"] == {"max-redeliveries": 250, "expired": 250}
    assert summary["sourceTopics"] == {T + "orders": 500}

    status, letters = call(base, "GET", P + "/orders-sub-DLQ/letterbox/deadLetters?limit=3&reason=expired")
    assert status == 200 and len(letters) == 3
    first = letters[0]
    assert first["properties"]["DEAD_LETTER_REASON"] == "expired" and first["properties"]["batch"] == "B"
    assert first["key"] == "k250" and first["payloadText"] == "p250"
    assert first["payloadBase64"] == "cDI1MA==" and first["messageId"].count(":") == 3

    body = json.dumps({"reason": "max-redeliveries", "dryRun": True})
    assert call(base, "POST", P + "/orders-sub-DLQ/letterbox/redrive", body) == (
        200, {"matched": 250, "moved": 0, "remaining": 250, "dryRun": True})
    body = json.dumps({"reason": "max-redeliveries"})
    assert call(base, "POST", P + "/orders-sub-DLQ/letterbox/redrive", body) == (
        200, {"matched": 250, "moved": 250, "remaining": 0, "dryRun": False})
    # run again: nothing left of that reason, nothing moved twice
    assert call(base, "POST", P + "/orders-sub-DLQ/letterbox/redrive", body)[1]["moved"] == 0
    summary = _dlq_summary(base, dlq)
    assert summary["messages"] == 250 and summary["byReason"] == {"expired": 250}

    consumer = client.subscribe(T + "orders", "sub", consumer_type=pulsar.ConsumerType.Shared)
    got: dict[str, Any] = {}
    while True:
        try:
            msg = consumer.receive(timeout_millis=2000)
        except pulsar.Timeout:
            break
        got[msg.partition_key()] = msg
        consumer.acknowledge(msg)
    consumer.close()
    assert sorted(got) == sorted(f"k{i}" for i in range(250))
    for key, msg in got.items():
        i = key[1:]
        props = msg.properties()
        assert msg.data() == f"p{i}".encode()
        assert props["batch"] == "A" and props["i"] == i
        assert props["REAL_TOPIC"] == T + "orders" and "ORIGIN_MESSAGE_ID" in props
        assert not any(k.startswith("DEAD_LETTER_") or k == "DELIVERY_COUNT" for k in props)
        assert msg.redelivery_count() == 0

    # expiring "all subscriptions" of the DLQ does not touch the redrive/purge marks
    assert call(base, "POST", P + "/orders-sub-DLQ/all_subscription/expireMessages/0")[0] == 204
    assert _dlq_summary(base, dlq)["messages"] == 250

    # purge the rest
    body = json.dumps({"reason": "expired", "dryRun": True})
    assert call(base, "POST", P + "/orders-sub-DLQ/letterbox/purge", body) == (200, {"purged": 250, "dryRun": True})
    assert call(base, "POST", P + "/orders-sub-DLQ/letterbox/purge", '{"reason": "expired"}') == (
        200, {"purged": 250, "dryRun": False})
    assert _dlq_summary(base, dlq)["messages"] == 0
    assert call(base, "GET", P + "/orders-sub-DLQ/letterbox/deadLetters")[1] == []


def test_dead_letter_errors(broker: BrokerProcess) -> None:
    base = broker.admin_url
    assert call(base, "PUT", P + "/plain-dlq-errors")[0] == 204
    r = P + "/plain-dlq-errors/letterbox/redrive"
    assert call(base, "POST", r, "{nope")[0] == 400
    assert call(base, "POST", r, "[]")[0] == 400
    assert call(base, "POST", r, '{"colour": "red"}')[0] == 400
    assert call(base, "POST", r, '{"maxMessages": "ten"}')[0] == 400
    assert call(base, "POST", r, '{"maxMessages": 0}')[0] == 412
    assert call(base, "POST", r, '{"ratePerSecond": -1}')[0] == 412
    assert call(base, "POST", r, '{"target": "bad name with spaces://x"}')[0] == 412
    assert call(base, "POST", r, '{"dryRun": "yes"}')[0] == 400
    assert call(base, "POST", P + "/plain-dlq-errors/letterbox/purge", '{"target": "x"}')[0] == 400
    assert call(base, "POST", P + "/ghost-DLQ/letterbox/redrive", "{}")[0] == 404
    assert call(base, "GET", P + "/ghost-DLQ/letterbox/deadLetters")[0] == 404
    assert call(base, "GET", P + "/plain-dlq-errors/letterbox/deadLetters?limit=0")[0] == 412
    assert call(base, "GET", P + "/plain-dlq-errors/letterbox/deadLetters?limit=x")[0] == 412
    assert call(base, "GET", "/admin/v2/namespaces/public/ghost/letterbox/deadLetterTopics")[0] == 404
    assert call(base, "GET", P + "/plain-dlq-errors/letterbox/redrive")[0] == 405
    # an empty topic: nothing matches, nothing moves
    assert call(base, "POST", r, "{}") == (200, {"matched": 0, "moved": 0, "remaining": 0, "dryRun": False})


def test_interrupted_redrive_moves_nothing_twice(broker_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "d"
    b = broker_factory(data)
    base = b.admin_url
    policy = '{"maxRedeliverCount": 1}'
    assert call(base, "POST", NS + "/letterbox/deadLetterPolicy", policy)[0] == 204
    assert call(base, "PUT", P + "/src")[0] == 204
    assert call(base, "PUT", P + "/src/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    client = pulsar.Client(b.url, logger=_quiet_logger())
    _produce(client, T + "src", 0, 300, "C")
    client.close()
    assert call(base, "POST", P + "/src/subscription/s/expireMessages/0")[0] == 204
    assert _dlq_summary(base, T + "src-s-DLQ")["byReason"] == {"expired": 300}

    body = json.dumps({"reason": "expired", "target": T + "restored", "ratePerSecond": 40})
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call(base, "POST", P + "/src-s-DLQ/letterbox/redrive", body))
        except OSError as exc:  # the broker dies under the request
            outcome.append((0, str(exc)))

    runner = threading.Thread(target=run, daemon=True)
    runner.start()

    def restored() -> int:
        status, stats = call(base, "GET", P + "/restored/internalStats")
        return int(stats["numberOfEntries"]) if status == 200 else 0

    assert wait_until(lambda: restored() >= 60, 30)
    b.kill()  # kill -9 half-way
    runner.join(15)
    moved_before = outcome[0][1]["moved"] if outcome and outcome[0][0] == 200 else None
    assert moved_before is None, "the redrive finished before the kill; the test did not interrupt it"

    b2 = broker_factory(data)
    base = b2.admin_url
    left = _dlq_summary(base, T + "src-s-DLQ")["byReason"].get("expired", 0)
    status, entries = call(base, "GET", P + "/restored/internalStats")
    done = int(entries["numberOfEntries"])
    assert 60 <= done < 300 and left == 300 - done  # each committed move was marked in the same transaction
    again = json.dumps({"reason": "expired", "target": T + "restored"})
    status, result = call(base, "POST", P + "/src-s-DLQ/letterbox/redrive", again)
    assert status == 200 and result["moved"] == left and result["remaining"] == 0
    assert _dlq_summary(base, T + "src-s-DLQ")["messages"] == 0

    client = pulsar.Client(b2.url, logger=_quiet_logger())
    consumer = client.subscribe(T + "restored", "check", initial_position=pulsar.InitialPosition.Earliest)
    seen: list[str] = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=2000)
        except pulsar.Timeout:
            break
        seen.append(msg.data().decode())
        consumer.acknowledge(msg)
    client.close()
    assert len(seen) == 300 and sorted(seen) == sorted(f"p{i}" for i in range(300))
