"""Topic operations of pulsar-admin through REST and the official client: unload,
terminate (TopicTerminated for producers, end of topic for consumers, kept over a
restart), lastMessageId, trim, partitioned-internalStats, partition growth."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until
from tests.security.wire import Wire

P = "/admin/v2/persistent/public/default"


def _client(b: BrokerProcess) -> pulsar.Client:
    return pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())


def test_unload_closes_clients_which_reconnect_and_lose_nothing(broker: BrokerProcess) -> None:
    c = _client(broker)
    try:
        producer = c.create_producer("persistent://public/default/unload-me", batching_enabled=False)
        consumer = c.subscribe("persistent://public/default/unload-me", "s")
        for i in range(5):
            producer.send(f"a{i}".encode())
        assert call(broker.admin_url, "PUT", P + "/unload-me/unload")[0] == 204
        for i in range(5):
            producer.send(f"b{i}".encode())  # the producer reconnected by itself
        got = []
        for _ in range(10):
            msg = consumer.receive(10_000)
            got.append(msg.data().decode())
            consumer.acknowledge(msg)
        assert sorted(got) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
        assert wait_until(lambda: call(broker.admin_url, "GET", P + "/unload-me/stats")[1]
                          ["subscriptions"]["s"]["msgBacklog"] == 0)
    finally:
        c.close()
    assert call(broker.admin_url, "PUT", P + "/no-such-topic/unload")[0] == 404


def test_terminate_refuses_producers_and_ends_consumers(broker_factory: Any, tmp_path: Path) -> None:
    b: BrokerProcess = broker_factory(tmp_path / "d")
    topic = "persistent://public/default/ending"
    c = _client(b)
    try:
        producer = c.create_producer(topic, batching_enabled=False)
        consumer = c.subscribe(topic, "s")
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        status, last = call(b.admin_url, "POST", P + "/ending/terminate")
        assert status == 200, last
        assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())
        # idempotent: the same last message id
        assert call(b.admin_url, "POST", P + "/ending/terminate") == (200, last)
        with pytest.raises(pulsar.TopicTerminated):
            c.create_producer(topic)
        with pytest.raises(pulsar.TopicTerminated):
            producer.send(b"late")
        reader = c.create_reader(topic, pulsar.MessageId.earliest)  # before the acks delete them
        for i in range(3):
            msg = consumer.receive(10_000)
            assert msg.data() == f"m{i}".encode()
            consumer.acknowledge(msg)
        # the C++-based clients have no end-of-topic handler: no more messages, no error
        with pytest.raises(pulsar.Timeout):
            consumer.receive(1_000)
        seen = 0
        while reader.has_message_available():
            reader.read_next(10_000)
            seen += 1
        assert seen == 3
    finally:
        c.close()
    b.stop()
    b2: BrokerProcess = broker_factory(tmp_path / "d")
    c = _client(b2)
    try:
        with pytest.raises(pulsar.TopicTerminated):
            c.create_producer(topic)
        consumer = c.subscribe(topic, "s")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(1_000)
        status, stats = call(b2.admin_url, "GET", P + "/ending/stats")
        assert len(stats["subscriptions"]["s"]["consumers"]) == 1  # still connected
        assert call(b2.admin_url, "GET", P + "/ending/lastMessageId") == (200, last)
    finally:
        c.close()
    # deleting the topic forgets the termination
    assert call(b2.admin_url, "DELETE", P + "/ending?force=true")[0] == 204
    c = _client(b2)
    try:
        c.create_producer(topic).send(b"new life")
    finally:
        c.close()


def test_terminate_bad_input(broker: BrokerProcess) -> None:
    a = broker.admin_url
    assert call(a, "POST", P + "/never-made/terminate")[0] == 404
    assert call(a, "PUT", P + "/parted-t/partitions", "2")[0] == 204
    status, err = call(a, "POST", P + "/parted-t/terminate")
    assert status == 405 and "terminate/partitions" in err["reason"]
    status, out = call(a, "POST", P + "/parted-t/terminate/partitions")
    assert status == 200 and sorted(out) == ["0", "1"] and out["1"]["partitionIndex"] == 1
    assert call(a, "POST", P + "/not-parted/terminate/partitions")[0] == 404
    np = "/admin/v2/non-persistent/public/default/np-term"
    assert call(a, "PUT", np)[0] == 204
    status, err = call(a, "POST", np + "/terminate")
    assert status == 405 and "persistent" in err["reason"]


def test_last_message_id(broker: BrokerProcess, client: Any) -> None:
    a = broker.admin_url
    assert call(a, "GET", P + "/lmid/lastMessageId")[0] == 404
    producer = client.create_producer("persistent://public/default/lmid", batching_enabled=False)
    mid = None
    for _ in range(4):
        mid = producer.send(b"x")
    assert mid is not None
    status, got = call(a, "GET", P + "/lmid/lastMessageId")
    assert status == 200
    assert got == {"ledgerId": mid.ledger_id(), "entryId": mid.entry_id(), "partitionIndex": -1,
                   "batchIndex": -1, "batchSize": 0}


def test_trim_applies_retention_now(broker: BrokerProcess, client: Any) -> None:
    a = broker.admin_url
    topic = "persistent://public/default/trimmed"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(5):
        producer.send(b"y" * 100)
    for _ in range(5):
        consumer.acknowledge(consumer.receive(10_000))
    assert call(a, "POST", P + "/trimmed/trim")[0] == 204
    assert wait_until(lambda: call(a, "GET", P + "/trimmed/internalStats")[1]["numberOfEntries"] == 0)
    assert call(a, "POST", P + "/untrimmable/trim")[0] == 404


def test_partitioned_internal_stats_and_growth_keeps_subscriptions(broker: BrokerProcess, client: Any) -> None:
    a = broker.admin_url
    assert call(a, "PUT", P + "/grow/partitions", "2")[0] == 204
    client.subscribe("persistent://public/default/grow", "billing").close()
    status, stats = call(a, "GET", P + "/grow/partitioned-internalStats")
    assert status == 200 and stats["metadata"] == {"partitions": 2, "deleted": False}
    assert sorted(stats["partitions"]) == [f"persistent://public/default/grow-partition-{i}" for i in range(2)]
    assert "billing" in stats["partitions"]["persistent://public/default/grow-partition-1"]["cursors"]
    assert call(a, "POST", P + "/grow/partitions", "4")[0] == 204
    status, stats = call(a, "GET", P + "/grow/partitioned-internalStats")
    assert stats["metadata"] == {"partitions": 4, "deleted": False}
    assert "billing" in stats["partitions"]["persistent://public/default/grow-partition-3"]["cursors"]
    # the new partitions' messages reach the existing subscription
    producer = client.create_producer("persistent://public/default/grow", batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(8):
        producer.send(f"g{i}".encode())
    status, pstats = call(a, "GET", P + "/grow/partitioned-stats")
    assert pstats["subscriptions"]["billing"]["msgBacklog"] == 8
    status, err = call(a, "POST", P + "/grow/partitions", "3")
    assert status == 422 and "can't be less than" in err["reason"]  # Pulsar's status and words
    assert call(a, "GET", P + "/plain-nope/partitioned-internalStats")[0] == 404


def test_end_of_topic_frame_for_clients_that_handle_it(broker: BrokerProcess, client: Any) -> None:
    """A client that is not C++-based (here our own codec) gets REACHED_END_OF_TOPIC once the
    subscription has acknowledged everything of a terminated topic, also on subscribe."""
    topic = "persistent://public/default/wire-end"
    client.create_producer(topic).send(b"only")
    assert call(broker.admin_url, "POST", P + "/wire-end/terminate")[0] == 200
    w = Wire(broker.port)
    try:
        assert w.connect().type == pb.BaseCommand.CONNECTED
        w.send(client_commands.subscribe(topic, "w", 1, 1, initial_position=1))  # Earliest
        assert w.next(10).type == pb.BaseCommand.SUCCESS
        w.send(client_commands.flow(1, 10))
        msg = w.next(10)
        assert msg.type == pb.BaseCommand.MESSAGE
        w.send(client_commands.ack(1, [(msg.message.message_id.ledgerId, msg.message.message_id.entryId)]))
        end = w.next(10)
        assert end.type == pb.BaseCommand.REACHED_END_OF_TOPIC and end.reachedEndOfTopic.consumer_id == 1
        w.send(client_commands.subscribe(topic, "w2", 2, 2, initial_position=0))  # Latest: nothing left
        assert w.next(10).type == pb.BaseCommand.SUCCESS
        end = w.next(10)
        assert end.type == pb.BaseCommand.REACHED_END_OF_TOPIC and end.reachedEndOfTopic.consumer_id == 2
    finally:
        w.close()


def test_terminated_topic_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    import asyncio

    import pulsar.asyncio as pulsar_asyncio

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            producer = await client.create_producer("persistent://public/default/async-end")
            await producer.send(b"last")
            assert call(broker.admin_url, "POST", P + "/async-end/terminate")[0] == 200
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                await client.create_producer("persistent://public/default/async-end")
            assert refused.value.error() == pulsar.Result.TopicTerminated
        finally:
            await client.close()

    asyncio.run(run())
