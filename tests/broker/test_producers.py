"""Producer access modes, producer names and message deduplication, through the
official client against a real broker."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pulsar
import pytest

from tests.conftest import BrokerProcess, _quiet_logger

Mode = pulsar.ProducerAccessMode
DEDUP_ENV = {"LETTERBOX_DEDUPLICATION_ENABLED": "true"}


def topic_name(prefix: str = "prod") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def _round_trip(client: pulsar.Client, topic: str, producer: pulsar.Producer, body: bytes) -> None:
    reader = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=False)
    try:
        producer.send(body)
        assert reader.read_next(timeout_millis=10_000).data() == body
    finally:
        reader.close()


def test_exclusive_refused_while_another_producer_exists(client: pulsar.Client) -> None:
    topic = topic_name()
    shared = client.create_producer(topic, access_mode=Mode.Shared)
    with pytest.raises(pulsar.ProducerFenced):  # as Pulsar: an Exclusive producer is fenced
        client.create_producer(topic, access_mode=Mode.Exclusive)
    shared.send(b"still-works")
    shared.close()
    exclusive = client.create_producer(topic, access_mode=Mode.Exclusive)  # free now
    exclusive.send(b"exclusive")
    exclusive.close()


def test_shared_refused_while_exclusive_producer_exists(client: pulsar.Client) -> None:
    topic = topic_name()
    exclusive = client.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, access_mode=Mode.Shared)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)
    _round_trip(client, topic, exclusive, b"exclusive-still-works")
    exclusive.close()
    shared = client.create_producer(topic, access_mode=Mode.Shared)
    shared.close()


def test_wait_for_exclusive_completes_only_after_exclusive_closes(client: pulsar.Client) -> None:
    topic = topic_name()
    first = client.create_producer(topic, access_mode=Mode.Exclusive, producer_name="first")
    first_closed = threading.Event()
    done = threading.Event()
    result: dict[str, object] = {}

    def wait_for_it() -> None:
        try:
            result["producer"] = client.create_producer(
                topic, access_mode=Mode.WaitForExclusive, producer_name="second"
            )
            result["first_was_closed"] = first_closed.is_set()
        except Exception as exc:
            result["error"] = exc
        finally:
            done.set()

    waiter = threading.Thread(target=wait_for_it, daemon=True)
    waiter.start()
    # the waiter must still be blocked while `first` holds the topic (bounded check)
    assert not done.wait(2.0), result
    first.send(b"from-first")  # the holder is unaffected by the queued waiter
    first_closed.set()
    first.close()
    assert done.wait(20), "WaitForExclusive producer was never granted the topic"
    waiter.join(5)
    assert "error" not in result, result
    assert result["first_was_closed"] is True
    second = result["producer"]
    assert isinstance(second, pulsar.Producer)
    _round_trip(client, topic, second, b"from-second")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, access_mode=Mode.Shared)
    second.close()


def test_same_producer_name_twice_is_busy(client: pulsar.Client) -> None:
    topic = topic_name()
    p1 = client.create_producer(topic, producer_name="only-one")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="only-one")
    _round_trip(client, topic, p1, b"first-still-works")
    # a different topic may reuse the name
    other = client.create_producer(topic_name(), producer_name="only-one")
    other.close()
    p1.close()
    again = client.create_producer(topic, producer_name="only-one")  # free after close
    again.close()


def _read_everything(client: pulsar.Client, topic: str) -> list[bytes]:
    """All messages from the start of `topic`, ending after half a second of silence."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got: list[bytes] = []
    try:
        while True:
            try:
                got.append(reader.read_next(timeout_millis=1_000).data())
            except pulsar.Timeout:
                return got
    finally:
        reader.close()


def test_deduplication_drops_resent_sequence_ids_across_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    topic = topic_name("dedup")
    first = broker_factory(env=DEDUP_ENV)
    client = pulsar.Client(first.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        producer = client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
        assert producer.last_sequence_id() == -1
        for seq in (1, 2, 3):
            producer.send(f"m{seq}".encode(), sequence_id=seq)
        producer.send(b"m2-again", sequence_id=2)  # a duplicate: acknowledged, not stored
        producer.send(b"m4", sequence_id=4)
        assert producer.last_sequence_id() == 4
        producer.close()
        assert _read_everything(client, topic) == [b"m1", b"m2", b"m3", b"m4"]
    finally:
        client.close()
    assert first.stop() == 0, first.log()

    second = broker_factory(data_dir=first.data_dir, env=DEDUP_ENV)
    client = pulsar.Client(second.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        producer = client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
        assert producer.last_sequence_id() == 4  # continues from what was stored
        producer.send(b"m3-again", sequence_id=3)  # dropped after the restart too
        producer.send(b"m5", sequence_id=5)
        producer.close()
        assert _read_everything(client, topic) == [b"m1", b"m2", b"m3", b"m4", b"m5"]
        # another producer name has its own sequence
        other = client.create_producer(topic, producer_name="other-producer", batching_enabled=False)
        assert other.last_sequence_id() == -1
        other.send(b"o1", sequence_id=1)
        other.close()
        assert _read_everything(client, topic)[-1] == b"o1"
    finally:
        client.close()


def test_deduplication_keeps_every_chunk_of_a_chunked_message(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """The chunks of one message share its sequence id: deduplication judges the message by its
    last chunk, so a 6 MB message arrives whole, and a resend of its sequence id is dropped."""
    topic = topic_name("dedup-chunks")
    b = broker_factory(env=DEDUP_ENV)
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        big = bytes(range(256)) * (6 * 1024 * 4)  # 6 MiB
        producer = client.create_producer(topic, producer_name="chunker", chunking_enabled=True,
                                          batching_enabled=False)
        producer.send(big, sequence_id=1)
        producer.send(b"after", sequence_id=2)
        producer.send(big, sequence_id=1)  # a resend: acknowledged, not stored
        producer.close()
        assert _read_everything(client, topic) == [big, b"after"]
    finally:
        client.close()


def test_without_deduplication_resent_sequence_ids_are_stored(client: pulsar.Client) -> None:
    topic = topic_name("nodedup")
    producer = client.create_producer(topic, producer_name="plain-producer", batching_enabled=False)
    producer.send(b"a", sequence_id=1)
    producer.send(b"a-again", sequence_id=1)
    producer.close()
    assert _read_everything(client, topic) == [b"a", b"a-again"]
