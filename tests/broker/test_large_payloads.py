"""Messages of >= 1 MiB are stored as payload files (storage/payload_files.py): through the
official client they are produced, consumed, dead-lettered by the broker, listed, examined,
redriven and trimmed like any other message, and survive kill -9."""
from __future__ import annotations

import base64
import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pulsar

from tests.admin.helpers import call, call_raw
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
MB2 = 2 * 1024 * 1024


def body(i: int) -> bytes:
    return (f"large-{i}-".encode() + os.urandom(64)) * (MB2 // 80)


def payload_files(data_dir: Path) -> set[str]:
    d = data_dir / "payloads"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def named_files(data_dir: Path) -> set[str]:
    with sqlite3.connect(f"file:{data_dir / 'letterbox.db'}?mode=ro", uri=True, timeout=10) as db:
        return {r[0] for r in db.execute("SELECT data FROM entries WHERE typeof(data) = 'text'")}


def receive_all(consumer: pulsar.Consumer, n: int, ack: bool = True) -> list[pulsar.Message]:
    out = []
    for _ in range(n):
        msg = consumer.receive(30_000)
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)
    return out


def test_large_messages_round_trip_and_survive_kill9(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker: BrokerProcess = broker_factory(data_dir)
    topic = T + "large-" + uuid.uuid4().hex[:6]
    sent = [body(0), b"small-1", body(2), b"small-3"]
    client = pulsar.Client(broker.url, operation_timeout_seconds=60, logger=_quiet_logger())
    try:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i, data in enumerate(sent):
            producer.send(data, properties={"i": str(i)})  # receipted: durable
        got = receive_all(consumer, 4, ack=False)
        assert [m.data() for m in got] == sent
        assert [m.properties()["i"] for m in got] == ["0", "1", "2", "3"]
    finally:
        client.close()
    assert len(payload_files(data_dir)) == 2
    broker.kill()  # kill -9: nothing acked, everything receipted

    broker = broker_factory(data_dir)
    assert payload_files(data_dir) == named_files(data_dir) and len(payload_files(data_dir)) == 2
    client = pulsar.Client(broker.url, operation_timeout_seconds=60, logger=_quiet_logger())
    try:
        consumer = client.subscribe(topic, "s")
        got = receive_all(consumer, 4)
        assert [m.data() for m in got] == sent
        status, _, examined = call_raw(broker.admin_url, "GET", f"{P}/{topic.rsplit('/', 1)[1]}"
                                       "/examinemessage?initialPosition=earliest&messagePosition=1")
        assert status == 200 and examined == sent[0]
        consumer.close()
        # every subscription acked everything: retention 0 deletes the entries and their files
        assert wait_until(lambda: not payload_files(data_dir), 60), payload_files(data_dir)
    finally:
        client.close()


def test_a_large_poison_message_is_dead_lettered_listed_and_redriven(broker: BrokerProcess) -> None:
    name = "large-dlq-" + uuid.uuid4().hex[:6]
    topic, base = T + name, broker.admin_url
    client = pulsar.Client(broker.url, operation_timeout_seconds=60, logger=_quiet_logger())
    try:
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=20,
                                    properties={"letterbox.dlq.max_redeliveries": "1"})
        producer = client.create_producer(topic, batching_enabled=False)
        poison = body(7)
        producer.send(poison, partition_key="k7", properties={"p": "x"})
        producer.send(b"fine")
        acked = []

        def work() -> bool:
            try:
                msg = consumer.receive(200)
            except pulsar.Timeout:
                return False
            if msg.data() == poison:
                consumer.negative_acknowledge(msg)
                return False
            consumer.acknowledge(msg)
            acked.append(msg.data())
            return False

        def dead_lettered() -> bool:
            work()
            status, letters = call(base, "GET", f"{P}/{name}-work-DLQ/letterbox/deadLetters?limit=10")
            return status == 200 and len(letters) == 1

        assert wait_until(dead_lettered, 120, 0)
        _, letters = call(base, "GET", f"{P}/{name}-work-DLQ/letterbox/deadLetters?limit=10")
        assert base64.b64decode(letters[0]["payloadBase64"]) == poison
        assert letters[0]["key"] == "k7" and letters[0]["properties"]["p"] == "x"
        consumer.close()

        status, moved = call(base, "POST", f"{P}/{name}-work-DLQ/letterbox/redrive", json.dumps({}))
        assert status == 200 and moved["moved"] == 1, moved
        again = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared)
        msg = again.receive(30_000)
        assert msg.data() == poison and msg.partition_key() == "k7" and msg.properties()["p"] == "x"
        again.acknowledge(msg)
    finally:
        client.close()
