"""Strings that are not UTF-8 at the broker's door: a name the broker keeps (here a
consumer name) is refused with an error naming the field, and leaves the subscription's
durable state writable; message keys and property values pass through byte-exact and
every admin view of them answers (escaped), never a 500."""
from __future__ import annotations

import json
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pulsar

from letterbox.errors import ServerError
from letterbox.protocol import client_commands, parse_headers_and_payload, pb
from tests.admin.helpers import call, call_raw
from tests.broker.hostile_wire import INVALID_UTF8, marker, metadata, poisoned, send_frame
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

T = pb.BaseCommand


def _topic(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def _admin_path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _clean_log(broker: BrokerProcess) -> None:
    log = broker.log()
    assert "Traceback" not in log, log
    assert "not JSON serializable" not in log, log
    assert "internal error" not in log, log


def test_consumer_name_not_utf8_is_refused_and_the_subscription_stays_durable(
        broker_factory: Any, tmp_path: Path) -> None:
    broker: BrokerProcess = broker_factory(tmp_path / "data")
    topic = _topic("bad-consumer-name")
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    producer = client.create_producer(topic, batching_enabled=False)
    good = client.subscribe(topic, "orders", consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest,
                            negative_ack_redelivery_delay_ms=100)
    for i in range(20):
        producer.send(f"m{i}".encode())

    raw = RawConn(broker.port)
    raw.handshake()
    frame = client_commands.subscribe(topic, "orders", 7, 70, pb.CommandSubscribe.Shared,
                                      consumer_name=marker(INVALID_UTF8))
    raw.send(poisoned(frame, INVALID_UTF8))
    error = raw.expect(T.ERROR).command.error
    assert error.request_id == 70
    assert error.error == ServerError.NotAllowedError
    assert "consumer_name is not valid UTF-8" in error.message
    raw.ping_pong()  # the connection itself is fine
    raw.close()

    got = [good.receive(timeout_millis=10_000) for _ in range(20)]
    good.negative_acknowledge(got[0])  # an attempt-log row is written for the nack
    for msg in got[1:]:
        good.acknowledge(msg)
    again = good.receive(timeout_millis=10_000)
    good.acknowledge(again)
    stats_path = _admin_path(topic) + "/stats"
    assert wait_until(lambda: call(broker.admin_url, "GET", stats_path)[1]
                      ["subscriptions"]["orders"]["msgBacklog"] == 0, timeout=15)
    nacked = got[0].message_id()
    status, attempts = call(broker.admin_url, "GET", _admin_path(topic) + "/subscription/orders/letterbox/attempts/"
                            f"{nacked.ledger_id()}:{nacked.entry_id()}")
    assert status == 200, attempts
    client.close()
    _clean_log(broker)
    broker.kill()  # kill -9: what was acknowledged must have been written

    again_broker: BrokerProcess = broker_factory(tmp_path / "data")
    client = pulsar.Client(again_broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    consumer = client.subscribe(topic, "orders", consumer_type=pulsar.ConsumerType.Shared)
    try:
        consumer.receive(timeout_millis=1500)
        raise AssertionError("an acknowledged message came back after the restart")
    except pulsar.Timeout:
        pass
    client.close()
    _clean_log(again_broker)


def _receive(raw: RawConn, sub: str, topic: str, consumer_id: int, request_id: int) -> tuple[pb.CommandMessage, bytes]:
    raw.send(client_commands.subscribe(topic, sub, consumer_id, request_id, pb.CommandSubscribe.Shared,
                                       initial_position=pb.CommandSubscribe.Earliest))
    raw.expect(T.SUCCESS)
    raw.send(client_commands.flow(consumer_id, 10))
    frame = raw.expect(T.MESSAGE)
    assert frame.headers_and_payload is not None
    return frame.command.message, frame.headers_and_payload


def test_dead_letter_with_invalid_utf8_key_and_properties_lists_and_keeps_its_bytes(broker: BrokerProcess) -> None:
    topic = _topic("bad-bytes")
    raw = RawConn(broker.port)
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    key, value, prop_key = INVALID_UTF8, b"\xc0\x80v\xff!", b"k\xfe"  # markers of 4, 5 and 2 chars
    meta = metadata("p", 0, partition_key=marker(key),
                    properties=[pb.KeyValue(key="note", value=marker(value)),
                                pb.KeyValue(key=marker(prop_key), value="plain")])
    sent = meta.SerializeToString()
    for hostile in (value, key, prop_key):  # the longest marker first: the others are its prefixes
        sent = sent.replace(marker(hostile).encode(), hostile, 1)
    raw.send(send_frame(1, 0, b"payload", pb.MessageMetadata.FromString(sent)))
    raw.expect(T.SEND_RECEIPT)

    message, _ = _receive(raw, "s", topic, 2, 2)
    mid = f"{message.message_id.ledgerId}:{message.message_id.entryId}"
    dlq = topic + "-s-DLQ"
    status, moved = call(broker.admin_url, "POST", _admin_path(topic) + "/subscription/s/letterbox/move",
                         json.dumps({"messageId": mid, "target": dlq, "deadLetterReason": "terminated"}))
    assert status == 200 and moved["moved"], moved

    status, listing = call(broker.admin_url, "GET", _admin_path(dlq) + "/letterbox/deadLetters")
    assert status == 200, listing
    [dead] = listing["messages"] if isinstance(listing, dict) else listing
    text = json.dumps(dead)
    assert "\\\\xff" in text or "\\xff" in text, text  # the bytes are shown escaped
    assert dead["properties"]["note"].startswith("\\xc0\\x80v")
    assert dead["key"] == "\\xff\\xfe\\xc3(" and "truncated" not in dead
    one = _admin_path(dlq) + "/letterbox/deadLetters/" + dead["messageId"]
    status, _, raw_key = call_raw(broker.admin_url, "GET", one + "/key")
    assert status == 200 and raw_key == key  # the stored bytes, not their escaped view
    status, _, raw_value = call_raw(broker.admin_url, "GET", one + "/property?name=note")
    assert status == 200 and raw_value == value

    status, _, _ = call_raw(broker.admin_url, "GET", _admin_path(dlq) + "/examinemessage?initialPosition=earliest"
                            "&messagePosition=1")
    assert status == 200
    status, summary = call(broker.admin_url, "GET", "/admin/v2/namespaces/public/default/letterbox/deadLetterTopics")
    assert status == 200, summary

    # byte-exact in the DLQ: what a consumer of it receives carries the same bytes
    _, body = _receive(raw, "reader", dlq, 3, 3)
    got = parse_headers_and_payload(body).metadata
    assert got.partition_key == key
    props = {kv.key: kv.value for kv in got.properties}
    assert props["note"] == value and props[prop_key] == "plain"

    # and a redrive puts the same bytes back on the source topic
    status, redriven = call(broker.admin_url, "POST", _admin_path(dlq) + "/letterbox/redrive", "{}")
    assert status == 200 and redriven["moved"] == 1, redriven
    second = raw.expect(T.MESSAGE)  # to the source's consumer, which has permits left
    assert second.command.message.consumer_id == 2 and second.headers_and_payload is not None
    back = parse_headers_and_payload(second.headers_and_payload).metadata
    assert back.partition_key == key
    props = {kv.key: kv.value for kv in back.properties}
    assert props["note"] == value and props[prop_key] == "plain" and "DEAD_LETTER_REASON" not in props
    raw.close()
    _clean_log(broker)


def test_views_of_a_topic_with_invalid_utf8_metadata_answer(broker: BrokerProcess) -> None:
    topic = _topic("bad-view")
    raw = RawConn(broker.port)
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(send_frame(1, 0, b"x", metadata(marker(INVALID_UTF8), 0, partition_key="k"), INVALID_UTF8))
    raw.expect(T.SEND_RECEIPT)
    raw.send(client_commands.subscribe(topic, "s", 2, 2, pb.CommandSubscribe.Shared,
                                       initial_position=pb.CommandSubscribe.Earliest))
    raw.expect(T.SUCCESS)
    base = _admin_path(topic)
    for path in ("/stats", "/internalStats", "/subscription/s/position/1",
                 "/examinemessage?initialPosition=earliest&messagePosition=1"):
        status, _, _ = call_raw(broker.admin_url, "GET", base + urllib.parse.quote(path, safe="/?=&"))
        assert status == 200, path
    raw.close()
    _clean_log(broker)


def test_dead_letter_listing_cuts_large_keys_and_properties(broker: BrokerProcess) -> None:
    dlq = _topic("big-props") + "-DLQ"
    raw = RawConn(broker.port)
    raw.handshake()
    raw.create_producer(dlq, 1, 1)
    big = "p" * 1_000_000
    raw.send(send_frame(1, 0, b"x", metadata("p", 0, partition_key="k" * 100_000, properties=[
        pb.KeyValue(key="DEAD_LETTER_REASON", value="terminated"), pb.KeyValue(key="big", value=big)])))
    raw.expect(T.SEND_RECEIPT)
    raw.close()
    status, listing = call(broker.admin_url, "GET", _admin_path(dlq) + "/letterbox/deadLetters")
    assert status == 200, listing
    [dead] = listing
    assert dead["truncated"] is True and dead["truncatedFields"] == ["key", "property:big"]
    assert dead["properties"]["big"] == big[:1024] + "…"
    assert len(dead["key"]) == 1025 and dead["properties"]["DEAD_LETTER_REASON"] == "terminated"
    # the whole values, byte-exact, one request each
    one = _admin_path(dlq) + "/letterbox/deadLetters/" + dead["messageId"]
    status, _, body = call_raw(broker.admin_url, "GET", one + "/property?name=big")
    assert status == 200 and body == big.encode()
    status, _, body = call_raw(broker.admin_url, "GET", one + "/key")
    assert status == 200 and body == b"k" * 100_000


def test_a_long_consumer_name_is_kept_short_in_the_attempt_log(broker: BrokerProcess) -> None:
    topic = _topic("long-name")
    raw = RawConn(broker.port)
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(send_frame(1, 0, b"x", metadata("p", 0)))
    raw.expect(T.SEND_RECEIPT)
    raw.send(client_commands.subscribe(topic, "s", 2, 2, pb.CommandSubscribe.Shared, consumer_name="c" * 1_000_000,
                                       initial_position=pb.CommandSubscribe.Earliest))
    raw.expect(T.SUCCESS)
    raw.send(client_commands.flow(2, 10))
    mid = raw.expect(T.MESSAGE).command.message.message_id
    raw.send(client_commands.redeliver_unacknowledged(2, [(mid.ledgerId, mid.entryId)]))
    path = _admin_path(topic) + f"/subscription/s/letterbox/attempts/{mid.ledgerId}:{mid.entryId}"
    assert wait_until(lambda: len(call(broker.admin_url, "GET", path)[1].get("attempts", [])) == 1)
    [attempt] = call(broker.admin_url, "GET", path)[1]["attempts"]
    assert attempt["consumer"] == "c" * 255 + "…"
    raw.close()
    _clean_log(broker)
