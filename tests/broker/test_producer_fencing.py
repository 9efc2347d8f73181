"""Producer access modes as Apache Pulsar answers them (AbstractTopic's epoch rules):
a second Exclusive producer is fenced (ProducerFenced, not ProducerBusy), and an
ExclusiveWithFencing producer closes the current holder, whose reconnect is then
refused with ProducerFenced so its next send fails with ProducerFenced. Through the
official client, sync and pulsar.asyncio."""
from __future__ import annotations

import asyncio
import threading
import uuid

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from tests.conftest import BrokerProcess, _quiet_logger

Mode = pulsar.ProducerAccessMode


def topic_name(prefix: str = "fence") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def read_from_start(client: pulsar.Client, topic: str, n: int) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        return [reader.read_next(10_000).data() for _ in range(n)]
    finally:
        reader.close()


def test_second_exclusive_producer_is_fenced(client: pulsar.Client) -> None:
    topic = topic_name()
    first = client.create_producer(topic, access_mode=Mode.Exclusive, producer_name="first")
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive, producer_name="second")
    first.send(b"first-still-holds")  # the holder is not disturbed
    first.close()
    assert read_from_start(client, topic, 1) == [b"first-still-holds"]


def test_exclusive_beside_shared_producer_is_fenced(client: pulsar.Client) -> None:
    topic = topic_name()
    shared = client.create_producer(topic, access_mode=Mode.Shared)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)
    shared.send(b"shared")
    shared.close()


def test_exclusive_with_fencing_takes_over(client: pulsar.Client) -> None:
    topic = topic_name()
    old = client.create_producer(topic, access_mode=Mode.Exclusive, producer_name="old",
                                 batching_enabled=False)
    old.send(b"old-1")
    new = client.create_producer(topic, access_mode=Mode.ExclusiveWithFencing, producer_name="new",
                                 batching_enabled=False)
    new.send(b"new-1")
    with pytest.raises(pulsar.ProducerFenced):
        old.send(b"old-2")
    with pytest.raises(pulsar.ProducerFenced):  # and stays fenced
        old.send(b"old-3")
    new.send(b"new-2")  # the old producer's reconnect did not take the topic back
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)
    assert read_from_start(client, topic, 3) == [b"old-1", b"new-1", b"new-2"]
    new.close()


def test_exclusive_with_fencing_closes_shared_producers(client: pulsar.Client) -> None:
    """As in Pulsar, a Shared producer closed by the fencing one keeps trying to come back
    (ProducerBusy while the exclusive producer holds the topic): its send times out."""
    topic = topic_name()
    shared = client.create_producer(topic, access_mode=Mode.Shared, batching_enabled=False,
                                    send_timeout_millis=2_000)
    shared.send(b"shared-1")
    fencer = client.create_producer(topic, access_mode=Mode.ExclusiveWithFencing, batching_enabled=False)
    with pytest.raises(pulsar.Timeout):
        shared.send(b"shared-2")
    fencer.send(b"fencer-1")
    assert read_from_start(client, topic, 2) == [b"shared-1", b"fencer-1"]
    fencer.close()
    shared.close()


def test_exclusive_with_fencing_fails_queued_waiters(client: pulsar.Client) -> None:
    topic = topic_name()
    holder = client.create_producer(topic, access_mode=Mode.Exclusive)
    outcome: dict[str, object] = {}
    finished = threading.Event()

    def wait() -> None:
        try:
            outcome["producer"] = client.create_producer(topic, access_mode=Mode.WaitForExclusive)
        except Exception as exc:  # the exact type is asserted below
            outcome["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=wait, daemon=True).start()
    assert not finished.wait(1.5)  # queued behind the holder
    fencer = client.create_producer(topic, access_mode=Mode.ExclusiveWithFencing)
    assert finished.wait(20)
    assert isinstance(outcome.get("error"), pulsar.ProducerFenced), outcome
    fencer.send(b"fencer")
    fencer.close()
    holder.close()


def test_fencing_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        topic = topic_name("afence")
        try:
            first = await client.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False)
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                await client.create_producer(topic, access_mode=Mode.Exclusive)
            assert refused.value.error() == pulsar.Result.ProducerFenced
            await first.send(b"a-1")
            fencer = await client.create_producer(
                topic, access_mode=Mode.ExclusiveWithFencing, batching_enabled=False
            )
            await fencer.send(b"a-2")
            with pytest.raises(pulsar_asyncio.PulsarException) as fenced:
                await first.send(b"never")
            assert fenced.value.error() == pulsar.Result.ProducerFenced
            await fencer.close()
        finally:
            await client.close()

    asyncio.run(run())
