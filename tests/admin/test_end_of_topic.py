"""The end of a terminated topic as the official (C++-based) clients see it (issue 15 item 6).
pulsar-client 3.13 has no end-of-topic API (no Consumer.is_end_of_topic /
has_reached_end_of_topic, in sync or pulsar.asyncio) and its C++ core has no handler for
REACHED_END_OF_TOPIC: apache/pulsar-client-cpp's ClientConnection logs "Received invalid
message from server" and closes the connection on it (Apache Pulsar sends it anyway, and
such consumers reconnect again and again). letterbox does not send it to those clients, so
what they offer is what holds: the reader's has_message_available() is false at the end,
receive and read_next time out, and the consumer stays connected on the same connection --
for a consumer that read everything as the topic was terminated, and for one that connects
to an already terminated topic with messages left. Clients that handle the command get it
(tests/admin/test_topic_ops.py::test_end_of_topic_frame_for_clients_that_handle_it)."""
from __future__ import annotations

import asyncio
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default/"


def _consumer_since(broker: BrokerProcess, name: str, sub: str) -> str:
    """The address (client host:port) of the subscription's one consumer: a reconnect changes it."""
    status, stats = call(broker.admin_url, "GET", P + f"{name}/stats")
    assert status == 200, stats
    consumers = stats["subscriptions"][sub]["consumers"]
    assert len(consumers) == 1, consumers
    return str(consumers[0]["address"])


def _backlog(broker: BrokerProcess, name: str, sub: str) -> int:
    return int(call(broker.admin_url, "GET", P + f"{name}/stats")[1]["subscriptions"][sub]["msgBacklog"])


def _receive_and_ack(consumer: Any, count: int) -> list[bytes]:
    """Receive `count` messages (10 s each at most), acknowledging each: their bodies."""
    got = []
    for _ in range(count):
        msg = consumer.receive(10_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    return got


def _stays_at_the_end(broker: BrokerProcess, consumer: Any, name: str, sub: str) -> None:
    """Nothing more arrives, and the consumer is not disconnected (no reconnect loop)."""
    assert wait_until(lambda: _backlog(broker, name, sub) == 0, timeout=30)
    since = _consumer_since(broker, name, sub)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1500)
    assert consumer.is_connected()
    # the receive above was a 1.5 s window: the C++ client reconnects within ~0.1 s of a drop
    assert _consumer_since(broker, name, sub) == since


def test_official_client_reads_to_the_end_of_a_terminated_topic(broker: BrokerProcess,
                                                                 client: pulsar.Client) -> None:
    name = "eot-live"
    topic = f"persistent://public/default/{name}"
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "s")
    assert call(broker.admin_url, "PUT", P + f"{name}/subscription/late", '"earliest"')[0] == 204
    for i in range(3):
        producer.send(f"m{i}".encode())
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    status, last = call(broker.admin_url, "POST", P + f"{name}/terminate")
    assert status == 200, last
    assert _receive_and_ack(consumer, 3) == [b"m0", b"m1", b"m2"]
    _stays_at_the_end(broker, consumer, name, "s")

    read = []
    while reader.has_message_available():
        read.append(reader.read_next(10_000).data())
    assert read == [b"m0", b"m1", b"m2"]
    assert not reader.has_message_available()
    with pytest.raises(pulsar.Timeout):
        reader.read_next(1000)
    assert reader.is_connected()

    # a consumer connecting to the already terminated topic gets what is left, then the end
    late = client.subscribe(topic, "late")
    assert _receive_and_ack(late, 3) == [b"m0", b"m1", b"m2"]
    _stays_at_the_end(broker, late, name, "late")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    for c in (reader, consumer, late):
        c.close()


def test_pulsar_asyncio_at_the_end_of_a_terminated_topic(broker: BrokerProcess) -> None:
    import pulsar.asyncio as pulsar_asyncio

    name = "eot-async"
    topic = f"persistent://public/default/{name}"

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            producer = await client.create_producer(topic, batching_enabled=False)
            consumer = await client.subscribe(topic, "s")
            reader = await client.create_reader(topic, pulsar.MessageId.earliest)
            for i in range(2):
                await producer.send(f"a{i}".encode())
            assert call(broker.admin_url, "POST", P + f"{name}/terminate")[0] == 200
            got = []
            for _ in range(2):
                msg = await asyncio.wait_for(consumer.receive(), 10)
                got.append(msg.data())
                await consumer.acknowledge(msg)
            assert got == [b"a0", b"a1"]
            assert wait_until(lambda: _backlog(broker, name, "s") == 0, timeout=30)
            since = _consumer_since(broker, name, "s")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(consumer.receive(), 1.5)
            assert _consumer_since(broker, name, "s") == since
            read = []
            while await reader.has_message_available():
                read.append((await asyncio.wait_for(reader.read_next(), 10)).data())
            assert read == [b"a0", b"a1"]
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                await client.create_producer(topic)
            assert refused.value.error() == pulsar.Result.TopicTerminated
        finally:
            await client.close()

    asyncio.run(run())
