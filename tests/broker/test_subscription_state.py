"""The subscription's persisted state record and its own dead-letter path (issue 12 items
2-3, issue 10 item 1): a pending backoff survives kill -9, batch-index acks keep counts per
message, and a malformed batch never blocks or duplicates a dead letter."""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from pathlib import Path

import pulsar

from letterbox.protocol import (
    build_headers_and_payload,
    client_commands,
    parse_headers_and_payload,
    pb,
)
from letterbox.protocol.framing import encode_command
from letterbox.storage import Store
from tests.broker.test_broker_dlq import read_topic
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

T = pb.BaseCommand


def _stats(broker: BrokerProcess, topic: str) -> dict[str, object]:
    path = topic.replace("persistent://", "")
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/persistent/{path}/stats", timeout=10) as r:
        doc: dict[str, object] = json.loads(r.read())
    return doc


def _delayed(broker: BrokerProcess, topic: str, sub: str) -> int:
    subs = _stats(broker, topic)["subscriptions"]
    assert isinstance(subs, dict)
    return int(subs[sub]["msgDelayed"])


def test_pending_backoff_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic = f"persistent://public/default/backoff-kill-{uuid.uuid4().hex[:6]}"
    props = {"letterbox.backoff.min_ms": "1000", "letterbox.backoff.multiplier": "2",
             "letterbox.backoff.max_ms": "60000", "letterbox.dlq.max_redeliveries": "3"}
    broker = BrokerProcess(data).start()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, properties=props,
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=10)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"poison")
    received = []
    for _ in range(3):  # nacked three times: backoffs of 1 s, 2 s, then 4 s pending
        msg = consumer.receive(15_000)
        received.append(int(time.time() * 1000))
        consumer.negative_acknowledge(msg)
    due = received[-1] + 4000
    # the third backoff is decided, written and pending
    assert wait_until(lambda: _delayed(broker, topic, "s") == 1, timeout=10)
    broker.kill()
    with contextlib.suppress(pulsar.PulsarException):  # its broker is gone
        client.close()

    broker = BrokerProcess(data).start()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, properties=props,
                                    negative_ack_redelivery_delay_ms=10)
        msg = consumer.receive(20_000)
        at = int(time.time() * 1000)
        assert msg.data() == b"poison"
        assert at >= due - 100, f"delivered {due - at} ms before its backoff ended"
        assert msg.redelivery_count() == 3, "the count survived the crash"
        consumer.negative_acknowledge(msg)  # the 4th failure: past max redeliveries
        dead = read_topic(client, f"{topic}-s-DLQ", 1500)
        assert [m.data() for m in dead] == [b"poison"]
        stamps = dead[0].properties()
        assert stamps["DELIVERY_COUNT"] == "4"
        first = int(stamps["FIRST_DELIVERY_TIME"])
        assert received[0] - 2000 <= first <= received[0], "the first delivery time is the one before the crash"
        assert int(stamps["LAST_DELIVERY_TIME"]) >= due - 100
    finally:
        client.close()
        broker.stop()


def test_batch_index_acks_count_only_the_nacked_message(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/batch-idx-{uuid.uuid4().hex[:6]}"
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                          batching_max_publish_delay_ms=5000)
        bodies = [f"m{i}".encode() for i in range(10)]
        for body in bodies:
            producer.send_async(body, None, properties={"i": body.decode()})
        producer.flush()
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    properties={"letterbox.dlq.max_redeliveries": "3"},
                                    initial_position=pulsar.InitialPosition.Earliest,
                                    negative_ack_redelivery_delay_ms=300, batch_index_ack_enabled=True)
        seen: dict[bytes, int] = {}
        batch_entries = set()
        while True:
            try:
                msg = consumer.receive(3000)
            except pulsar.Timeout:
                break
            seen[msg.data()] = seen.get(msg.data(), 0) + 1
            batch_entries.add((msg.message_id().ledger_id(), msg.message_id().entry_id()))
            if msg.data() == b"m3":
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
        assert len(batch_entries) == 1, "the 10 messages were one batch"
        assert seen.pop(b"m3") == 4
        assert seen == {b: 1 for b in bodies if b != b"m3"}, "siblings delivered exactly once"
        dead = read_topic(client, f"{topic}-work-DLQ", 1500)
        assert [m.data() for m in dead] == [b"m3"]
        assert dead[0].properties()["DELIVERY_COUNT"] == "4"
        assert dead[0].properties()["i"] == "m3"
        consumer.close()
        again = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared)
        try:
            again.receive(1000)
            raise AssertionError("nothing may be left in the subscription")
        except pulsar.Timeout:
            pass
    finally:
        client.close()


# --- a malformed batch beside a good message ----------------------------------------------

MALFORMED_PAYLOAD = b"\x00\x00\x7f\xffnot a batch at all"


def _good_entry() -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1000)
    meta.properties.add(key="kind", value="good")
    return build_headers_and_payload(meta, b"good message")


def _malformed_batch() -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1000, num_messages_in_batch=2)
    meta.properties.add(key="kind", value="malformed")
    return build_headers_and_payload(meta, MALFORMED_PAYLOAD)


def _store_entries(data_dir: Path, topic: str) -> None:
    async def write() -> None:
        store = Store(data_dir)
        await store.start()
        led = store.open_ledger(topic)
        await led.append(_good_entry(), 1, 1000)
        await led.append(_malformed_batch(), 2, 1000)
        await store.close()

    asyncio.run(write())


def _subscribe_raw(conn: RawConn, topic: str, max_redeliveries: int) -> None:
    body = pb.CommandSubscribe(topic=topic, subscription="work", subType=pb.CommandSubscribe.Shared,
                               consumer_id=1, request_id=1, initialPosition=pb.CommandSubscribe.Earliest)
    body.metadata.add(key="letterbox.dlq.max_redeliveries", value=str(max_redeliveries))
    conn.send(encode_command(T(type=T.SUBSCRIBE, subscribe=body)))
    conn.expect(T.SUCCESS)
    conn.send(client_commands.flow(1, 100))


def test_malformed_batch_is_dead_lettered_raw_beside_a_good_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic = f"persistent://public/default/malformed-{uuid.uuid4().hex[:6]}"
    _store_entries(data, topic)
    broker = BrokerProcess(data).start()
    conn = RawConn(broker.port)
    try:
        conn.handshake()
        _subscribe_raw(conn, topic, max_redeliveries=2)
        for _ in range(3):  # both delivered, both nacked together, three times
            ids = set()
            while len(ids) < 2:
                frame = conn.expect(T.MESSAGE)
                ids.add(frame.command.message.message_id.entryId)
            ledger_id = frame.command.message.message_id.ledgerId
            conn.send(client_commands.redeliver_unacknowledged(1, [(ledger_id, e) for e in sorted(ids)]))
        dlq = f"{topic}-work-DLQ"
        assert wait_until(lambda: _backlog(broker, topic) == 0), "both left the subscription"
        reader = RawConn(broker.port)
        reader.handshake()
        body = pb.CommandSubscribe(topic=dlq, subscription="check", subType=pb.CommandSubscribe.Exclusive,
                                   consumer_id=1, request_id=1, initialPosition=pb.CommandSubscribe.Earliest)
        reader.send(encode_command(T(type=T.SUBSCRIBE, subscribe=body)))
        reader.expect(T.SUCCESS)
        reader.send(client_commands.flow(1, 100))
        dead = []
        while True:
            try:
                dead.append(reader.expect(T.MESSAGE, timeout=1.5))
            except TimeoutError:
                break
        reader.close()
        entries = [f.command.message.message_id.entryId for f in dead]
        assert entries == [0, 1], f"one entry per dead letter, no phantom ids: {entries}"
        parsed = [parse_headers_and_payload(f.headers_and_payload or b"") for f in dead]
        props = [{kv.key: kv.value for kv in p.metadata.properties} for p in parsed]
        by_kind = {p["kind"]: (p, bytes(x.payload)) for p, x in zip(props, parsed, strict=True)}
        good, good_payload = by_kind["good"]
        assert good_payload == b"good message"
        assert good["DEAD_LETTER_REASON"] == "max-redeliveries" and good["DELIVERY_COUNT"] == "3"
        bad, bad_payload = by_kind["malformed"]
        assert bad_payload == MALFORMED_PAYLOAD, "moved as the original raw bytes"
        assert bad["DEAD_LETTER_REASON"] == "max-redeliveries"
        assert "malformed" in bad["DEAD_LETTER_DESCRIPTION"]
    finally:
        conn.close()
        code = broker.stop()
    log = broker.log()
    assert code == 0
    assert "Traceback" not in log
    assert log.count("is malformed") == 1, "one log line for the malformed batch, no repeats"


def _backlog(broker: BrokerProcess, topic: str) -> int:
    subs = _stats(broker, topic)["subscriptions"]
    assert isinstance(subs, dict)
    return int(subs["work"]["msgBacklog"])
