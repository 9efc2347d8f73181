"""Readers (non-durable subscriptions), seek, last message id and partitioned metadata."""
from __future__ import annotations

import time
import uuid

import pulsar
import pytest


def topic_name(prefix: str = "rd") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def fill(client: pulsar.Client, topic: str, n: int, batching: bool = False) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=batching)
    ids: list[pulsar.MessageId] = []
    for i in range(n):
        ids.append(producer.send(str(i).encode()))
    producer.close()
    return ids


def read_all(reader: pulsar.Reader, timeout_ms: int = 500) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(reader.read_next(timeout_ms).data())
        except pulsar.Timeout:
            return out


def test_reader_from_earliest_and_latest(client: pulsar.Client) -> None:
    topic = topic_name()
    fill(client, topic, 5)
    r1 = client.create_reader(topic, pulsar.MessageId.earliest)
    assert read_all(r1) == [str(i).encode() for i in range(5)]
    r2 = client.create_reader(topic, pulsar.MessageId.latest)
    assert read_all(r2, 300) == []
    producer = client.create_producer(topic)
    producer.send(b"fresh")
    assert r2.read_next(10_000).data() == b"fresh"
    assert r1.read_next(10_000).data() == b"fresh"
    for x in (r1, r2, producer):
        x.close()


@pytest.mark.parametrize("inclusive", [False, True])
def test_reader_from_given_id(client: pulsar.Client, inclusive: bool) -> None:
    topic = topic_name()
    ids = fill(client, topic, 6)
    reader = client.create_reader(topic, ids[2], start_message_id_inclusive=inclusive)
    expected = [str(i).encode() for i in range(2 if inclusive else 3, 6)]
    assert read_all(reader) == expected
    reader.close()


def test_reader_has_message_available(client: pulsar.Client) -> None:
    topic = topic_name()
    fill(client, topic, 2)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.has_message_available()
    reader.read_next(10_000)
    reader.read_next(10_000)
    assert not reader.has_message_available()
    reader.close()


def test_consumer_seek_by_message_id(client: pulsar.Client) -> None:
    topic = topic_name()
    ids = fill(client, topic, 6)
    consumer = client.subscribe(topic, "seeker", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(6):
        consumer.acknowledge(consumer.receive(10_000))
    # as with Pulsar and the official client, seek(id) resumes after that message
    consumer.seek(ids[3])
    got = []
    for _ in range(2):
        msg = consumer.receive(10_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == [b"4", b"5"]
    consumer.close()


def test_consumer_seek_by_time(client: pulsar.Client) -> None:
    topic = topic_name()
    fill(client, topic, 3)
    time.sleep(0.05)  # publish times must differ from the mark taken next
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"after-mark")
    consumer = client.subscribe(topic, "timeseek", initial_position=pulsar.InitialPosition.Earliest)
    consumer.seek(mark)
    assert consumer.receive(10_000).data() == b"after-mark"
    consumer.seek(0)
    assert consumer.receive(10_000).data() == b"0"
    consumer.close()
    producer.close()


def test_reader_seek(client: pulsar.Client) -> None:
    topic = topic_name()
    ids = fill(client, topic, 5)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert read_all(reader) == [str(i).encode() for i in range(5)]
    reader.seek(ids[1])
    assert read_all(reader) == [b"2", b"3", b"4"]
    reader.close()


def test_get_last_message_id(client: pulsar.Client) -> None:
    topic = topic_name()
    ids = fill(client, topic, 3)
    consumer = client.subscribe(topic, "last")
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
    consumer.close()
