"""Broker-side dead lettering (PIP-22) and redelivery backoff, set through consumer properties."""
from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, wait_until

TYPES = {
    "exclusive": pulsar.ConsumerType.Exclusive,
    "shared": pulsar.ConsumerType.Shared,
    "failover": pulsar.ConsumerType.Failover,
    "key_shared": pulsar.ConsumerType.KeyShared,
}
DLQ_PROPS = {"letterbox.dlq.max_redeliveries": "3"}


def read_topic(client: pulsar.Client, topic: str, idle_ms: int = 1000) -> list[pulsar.Message]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    try:
        while True:
            try:
                out.append(reader.read_next(idle_ms))
            except pulsar.Timeout:
                return out
    finally:
        reader.close()


def work(consumer: pulsar.Consumer, poison: set[bytes], idle_ms: int = 2500) -> set[bytes]:
    acked: set[bytes] = set()
    while True:
        try:
            msg = consumer.receive(idle_ms)
        except pulsar.Timeout:
            return acked
        if msg.data() in poison:
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
            acked.add(msg.data())


@pytest.mark.parametrize("kind", list(TYPES))
def test_broker_moves_poison_messages_to_dlq_once(client: pulsar.Client, kind: str) -> None:
    topic = f"persistent://public/default/bdlq-{kind}-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "work", consumer_type=TYPES[kind], properties=DLQ_PROPS,
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    bodies = [f"m{i}".encode() for i in range(20)]
    poison = {b"m3", b"m7", b"m11", b"m19"}
    for i, body in enumerate(bodies):
        producer.send(body, partition_key=f"key-{i}", properties={"i": str(i)}, event_timestamp=1000 + i)
    acked = work(consumer, poison)
    assert acked == set(bodies) - poison
    dead = read_topic(client, f"{topic}-work-DLQ")
    assert sorted(m.data() for m in dead) == sorted(poison), "each poison message exactly once"
    for m in dead:
        i = int(m.properties()["i"])
        props = m.properties()
        assert m.partition_key() == f"key-{i}"
        assert m.event_timestamp() == 1000 + i
        assert props["REAL_TOPIC"] == topic
        assert props["ORIGIN_MESSAGE_ID"].count(":") == 3
        assert props["DEAD_LETTER_REASON"] == "max-redeliveries"
        assert props["DEAD_LETTER_SUBSCRIPTION"] == "work"
        assert props["DELIVERY_COUNT"] == "4"
        assert int(props["FIRST_DELIVERY_TIME"]) <= int(props["LAST_DELIVERY_TIME"])
    consumer.close()
    # nothing is left in the source subscription
    again = client.subscribe(topic, "work", consumer_type=TYPES[kind])
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=500)
    again.close()
    producer.close()


@pytest.mark.parametrize("kind", list(TYPES))
def test_broker_dlq_survives_repeated_crashes(tmp_path: Path, kind: str) -> None:
    """1,000 messages, 100 always fail, broker killed 5 times: exactly 100 dead letters."""
    data = tmp_path / "data"
    topic = f"persistent://public/default/crashdlq-{uuid.uuid4().hex[:6]}"
    total, poison = 1000, {f"m{i}".encode() for i in range(0, 1000, 10)}
    broker = BrokerProcess(data).start()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                      block_if_queue_full=True)
    for i in range(total):
        producer.send_async(f"m{i}".encode(), None, properties={"i": str(i)})
    producer.flush()
    client.close()
    acked: set[bytes] = set()
    for crash in range(6):
        client = pulsar.Client(broker.url, operation_timeout_seconds=10)
        consumer = client.subscribe(topic, "work", consumer_type=TYPES[kind],
                                    properties=DLQ_PROPS, initial_position=pulsar.InitialPosition.Earliest,
                                    negative_ack_redelivery_delay_ms=20, batch_index_ack_enabled=True)
        if crash < 5:
            stop = threading.Event()

            def run(c: pulsar.Consumer = consumer, s: threading.Event = stop, done: set[bytes] = acked) -> None:
                while not s.is_set():
                    try:
                        msg = c.receive(200)
                    except pulsar.PulsarException:
                        continue
                    if msg.data() in poison:
                        c.negative_acknowledge(msg)
                    else:
                        c.acknowledge(msg)
                        done.add(msg.data())

            t = threading.Thread(target=run)
            t.start()
            time.sleep(0.3 + 0.2 * crash)  # let work happen, then crash mid-flight
            broker.kill()
            stop.set()
            t.join()
            with contextlib.suppress(pulsar.PulsarException):
                client.close()
            broker = BrokerProcess(data).start()
        else:
            acked |= work(consumer, poison)
            client.close()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        dead = read_topic(client, f"{topic}-work-DLQ")
        dead_bodies = [m.data() for m in dead]
        assert len(dead_bodies) == len(set(dead_bodies)), "duplicated dead letters"
        assert set(dead_bodies) == poison
        assert acked == {f"m{i}".encode() for i in range(total)} - poison
    finally:
        client.close()
        broker.stop()


def test_backoff_gaps_follow_the_multiplier(client: pulsar.Client) -> None:
    topic = f"persistent://public/default/backoff-{uuid.uuid4().hex[:6]}"
    props = {"letterbox.backoff.min_ms": "300", "letterbox.backoff.max_ms": "2400",
             "letterbox.backoff.multiplier": "2"}
    consumer = client.subscribe(topic, "b", consumer_type=pulsar.ConsumerType.Shared, properties=props,
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=10)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"retry-me")
    times = []
    for _ in range(6):
        msg = consumer.receive(10_000)
        times.append(time.monotonic())
        consumer.negative_acknowledge(msg)
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(times)]
    expected = [300, 600, 1200, 2400, 2400]
    for gap, want in zip(gaps, expected, strict=True):
        assert want * 0.95 <= gap <= want * 1.10 + 30, (gaps, expected)
    consumer.close()
    producer.close()


def test_crash_looping_consumer_sends_poison_to_dlq(client: pulsar.Client) -> None:
    """A consumer that dies on the same message every time: its disconnects count."""
    topic = f"persistent://public/default/crashloop-{uuid.uuid4().hex[:6]}"
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"poison", properties={"why": "crashes the handler"})
    for i in range(5):
        producer.send(f"fine-{i}".encode())
    counts = []
    for _ in range(4):
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    properties=DLQ_PROPS, initial_position=pulsar.InitialPosition.Earliest)
        msg = consumer.receive(10_000)
        assert msg.data() == b"poison"
        counts.append(msg.redelivery_count())
        consumer.close()  # the handler "crashed" holding it (and the prefetched ones)
    assert counts == [0, 1, 2, 3]
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared, properties=DLQ_PROPS)
    rest = []
    while True:
        try:
            m = consumer.receive(1500)
        except pulsar.Timeout:
            break
        rest.append((m.data(), m.redelivery_count()))
        consumer.acknowledge(m)
    assert sorted(rest) == [(f"fine-{i}".encode(), 0) for i in range(5)], "prefetched messages are not punished"
    dead = read_topic(client, f"{topic}-work-DLQ")
    assert [m.data() for m in dead] == [b"poison"]
    assert dead[0].properties()["why"] == "crashes the handler"
    assert dead[0].properties()["DELIVERY_COUNT"] == "4"
    consumer.close()
    producer.close()


BATCH_DLQ_PROPS = {"letterbox.dlq.max_redeliveries": "2"}


@pytest.mark.parametrize("compression", ["none", "lz4", "zlib"])
def test_dead_letter_of_one_batch_message_moves_only_that_message(
        broker: BrokerProcess, client: pulsar.Client, compression: str) -> None:
    """Five messages in one batch entry, one of them poison: the DLQ gets that message
    alone (its key, properties and the stamps), its siblings stay acknowledged, and a
    redrive appends exactly one message back."""
    name = f"bdlq-batch-{compression}-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{name}"
    codec = {"none": pulsar.CompressionType.NONE, "lz4": pulsar.CompressionType.LZ4,
             "zlib": pulsar.CompressionType.ZLib}[compression]
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                properties=BATCH_DLQ_PROPS, initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=200, batch_index_ack_enabled=True)
    # a subscription that never acknowledges: it counts what the topic holds
    client.subscribe(topic, "audit", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=10_000, compression_type=codec)
    ids: list[pulsar.MessageId] = []
    for i in range(5):
        poison = i == 2
        producer.send_async(b"poison" if poison else f"good-{i}".encode(),
                            lambda _res, mid: ids.append(mid),
                            partition_key="poison-key" if poison else f"key-{i}",
                            properties={"kind": "poison", "why": "bad"} if poison else {"kind": "good"},
                            event_timestamp=5000 + i)
    producer.flush()
    assert wait_until(lambda: len(ids) == 5)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == 1, "the five messages are one entry"
    dlq = f"{topic}-work-DLQ"
    received: list[bytes] = []

    def settle() -> bool:
        with contextlib.suppress(pulsar.Timeout):
            msg = consumer.receive(300)
            received.append(msg.data())
            if msg.data() == b"poison":
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
        status, letters = call(broker.admin_url, "GET", f"/admin/v2/persistent/public/default/{name}-work-DLQ"
                               "/letterbox/deadLetters?limit=100")
        return status == 200 and len(letters) >= 1

    assert wait_until(settle, 30, 0)
    with contextlib.suppress(pulsar.Timeout):  # nothing else comes: no redelivery of the good ones
        while True:
            received.append(consumer.receive(1500).data())
    assert sorted(set(received) - {b"poison"}) == [f"good-{i}".encode() for i in (0, 1, 3, 4)]
    assert [r for r in received if r != b"poison"] and len(received) - received.count(b"poison") == 4, received
    assert received.count(b"poison") == 3  # first delivery and two redeliveries

    dead = read_topic(client, dlq)
    assert [m.data() for m in dead] == [b"poison"], "only the poison message is a dead letter"
    [letter] = dead
    props = letter.properties()
    assert letter.partition_key() == "poison-key"
    assert letter.event_timestamp() == 5002
    assert props["kind"] == "poison" and props["why"] == "bad"
    assert props["REAL_TOPIC"] == topic
    origin = ids[2]
    assert props["ORIGIN_MESSAGE_ID"] == f"{origin.ledger_id()}:{origin.entry_id()}:-1:2"
    assert props["DEAD_LETTER_REASON"] == "max-redeliveries"
    assert props["DEAD_LETTER_SUBSCRIPTION"] == "work"
    assert props["DELIVERY_COUNT"] == "3"
    assert int(props["FIRST_DELIVERY_TIME"]) <= int(props["LAST_DELIVERY_TIME"])
    assert letter.message_id().batch_index() == -1, "the dead letter is a message alone, not a batch"

    # the redrive appends the one message, which is delivered once
    _redrive_delivers_once(broker, f"/admin/v2/persistent/public/default/{name}-work-DLQ", {}, consumer,
                           (b"poison", "poison-key"))
    audit = client.subscribe(topic, "audit")
    held = []
    with contextlib.suppress(pulsar.Timeout):
        while True:
            held.append(audit.receive(1500).data())
    assert sorted(held) == sorted([f"good-{i}".encode() for i in (0, 1, 3, 4)] + [b"poison"] * 2), \
        "the redrive added exactly one message to the topic"
    audit.close()
    producer.close()


def test_terminated_batch_message_is_named_as_the_dead_letter_listing_names_it(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    """A terminate (the move route) of one message of a batch: the id the route answers is
    the dead letter's id in the DLQ listing, so a redrive of that id moves that one message."""
    name = f"bdlq-term-{uuid.uuid4().hex[:6]}"
    topic, base = f"persistent://public/default/{name}", "/admin/v2/persistent/public/default/"
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest, batch_index_ack_enabled=True)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=3,
                                      batching_max_publish_delay_ms=10_000)
    for i in range(3):
        producer.send_async(f"m{i}".encode(), None, partition_key=f"k{i}", properties={"i": str(i)})
    producer.flush()
    got = [consumer.receive(10_000) for _ in range(3)]
    bad = next(m for m in got if m.data() == b"m1")
    mid = bad.message_id()
    assert mid.batch_index() == 1
    status, answer = call(broker.admin_url, "POST", f"{base}{name}/subscription/work/letterbox/move", json.dumps({
        "messageId": f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:1", "target": f"{topic}-work-DLQ",
        "deadLetterReason": "terminated"}))
    assert status == 200 and answer["moved"] is True, answer
    for m in got:
        if m is not bad:
            consumer.acknowledge(m)
    status, letters = call(broker.admin_url, "GET", f"{base}{name}-work-DLQ/letterbox/deadLetters?limit=100")
    assert status == 200 and [d["messageId"] for d in letters] == [answer["messageId"]], (answer, letters)
    [letter] = read_topic(client, f"{topic}-work-DLQ")
    assert (letter.data(), letter.partition_key(), letter.properties()["i"]) == (b"m1", "k1", "1")
    assert letter.properties()["ORIGIN_MESSAGE_ID"] == f"{mid.ledger_id()}:{mid.entry_id()}:-1:1"
    _redrive_delivers_once(broker, f"{base}{name}-work-DLQ", {"messageIds": [answer["messageId"]]}, consumer,
                           (b"m1", "k1"))
    producer.close()


def _redrive_delivers_once(broker: BrokerProcess, dlq_path: str, body: dict[str, object],
                           consumer: pulsar.Consumer, expected: tuple[bytes, str]) -> None:
    """A redrive of the DLQ at `dlq_path` moves one message, which `consumer` then receives
    (payload and key as `expected`) once and no more; the consumer is closed."""
    status, result = call(broker.admin_url, "POST", f"{dlq_path}/letterbox/redrive", json.dumps(body))
    assert status == 200 and result["moved"] == 1, result
    back = consumer.receive(10_000)
    assert (back.data(), back.partition_key()) == expected
    consumer.acknowledge(back)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)
    consumer.close()
