"""Compaction and the topic's life: a partitioned topic compacts every partition, a deleted
topic takes its compacted view with it (a topic re-created under the name starts without
one), and the __compaction subscription holds entries not compacted yet."""
from __future__ import annotations

import sqlite3
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.broker.test_compaction import P, _topic, compact_and_wait, produce_keyed, read_all
from tests.conftest import BrokerProcess, wait_until


def test_partitioned_topic_compacts_every_partition(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic()
    assert call(broker.admin_url, "PUT", P + topic + "/partitions", "3")[0] == 204
    latest = produce_keyed(client, topic, 600, 30, 4)
    assert call(broker.admin_url, "PUT", P + topic + "/compaction")[0] == 204
    status, body = call(broker.admin_url, "GET", P + topic + "/compaction")
    assert status == 405 and "partition" in body["reason"], body
    for i in range(3):
        part = f"{P}{topic}-partition-{i}/compaction"
        assert wait_until(lambda part=part: call(broker.admin_url, "GET", part)[1]["status"] == "SUCCESS",
                          timeout=60)
    consumer = client.subscribe(f"persistent://public/default/{topic}", "view", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = {}
    for _ in range(len(latest)):
        msg = consumer.receive(timeout_millis=20_000)
        got[msg.partition_key()] = msg.data()
    assert got == latest
    consumer.close()


def test_deleted_topic_takes_its_view_along(broker_factory: Any, tmp_path: Any) -> None:
    broker = broker_factory()
    client = pulsar.Client(broker.url)
    try:
        topic = _topic()
        produce_keyed(client, topic, 100, 10, 0)
        compact_and_wait(broker, topic)
        assert call(broker.admin_url, "DELETE", P + topic + "?force=true")[0] == 204
        db = sqlite3.connect(f"file:{tmp_path / 'data' / 'letterbox.db'}?mode=ro", uri=True)
        try:
            assert db.execute("SELECT COUNT(*) FROM compacted_entries").fetchone() == (0,)
            assert db.execute("SELECT COUNT(*) FROM metadata WHERE key LIKE 'compaction:%'").fetchone() == (0,)
        finally:
            db.close()
        latest = produce_keyed(client, topic, 5, 5, 0)  # re-created under the same name
        assert call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "NOT_RUN"
        assert {m.partition_key(): m.data() for m in read_all(client, topic, compacted=True)} == latest
    finally:
        client.close()


def test_entries_after_the_horizon_wait_for_the_next_compaction(broker: BrokerProcess, client: pulsar.Client) -> None:
    """Retention 0 and no other subscription: the compacted entries go, but what came after
    the horizon stays until a compaction took it in (the __compaction subscription)."""
    topic = _topic()
    produce_keyed(client, topic, 50, 5, 0)
    compact_and_wait(broker, topic)
    later = produce_keyed(client, topic, 20, 20, 0)
    subs = call(broker.admin_url, "GET", P + topic + "/subscriptions")[1]
    assert subs == ["__compaction"]
    stats = call(broker.admin_url, "GET", P + topic + "/stats")[1]
    assert stats["subscriptions"]["__compaction"]["msgBacklog"] == 20
    # the compacted entries are deleted (after the ledger's trim delay), the 20 later ones stay
    assert wait_until(lambda: call(broker.admin_url, "GET", P + topic + "/internalStats")[1]["numberOfEntries"] == 20)
    plain = read_all(client, topic, compacted=False)
    assert [m.data() for m in plain] == list(later.values())  # only the entries after the horizon


def test_broker_refuses_read_compacted_on_shared(broker: BrokerProcess) -> None:
    """The official client refuses it before asking; a client that asks anyway gets
    NotAllowedError naming the rule, and nothing is created."""
    from letterbox.protocol import pb
    from letterbox.protocol.client_commands import subscribe
    from tests.broker.test_robustness import RawConn

    topic = _topic()
    raw = RawConn(broker.port)
    try:
        raw.handshake()
        for sub_type in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared):
            raw.send(subscribe(f"persistent://public/default/{topic}", "s", 1, 7, sub_type, read_compacted=True))
            error = raw.expect(pb.BaseCommand.ERROR).command.error
            assert error.request_id == 7 and error.error == pb.ServerError.NotAllowedError
            assert "Exclusive and Failover" in error.message
        assert call(broker.admin_url, "GET", P + topic + "/stats")[0] == 404  # nothing was created
        raw.send(subscribe(f"persistent://public/default/{topic}", "s", 1, 8, pb.CommandSubscribe.Exclusive,
                           read_compacted=True))
        assert raw.expect(pb.BaseCommand.SUCCESS).command.success.request_id == 8
    finally:
        raw.close()


def test_compacted_reader_and_consumer_with_pulsar_asyncio(broker: BrokerProcess, client: pulsar.Client) -> None:
    import asyncio

    import pulsar.asyncio as pulsar_asyncio

    from tests.conftest import _quiet_logger

    topic = _topic()
    full = f"persistent://public/default/{topic}"
    latest = produce_keyed(client, topic, 500, 25, 5)
    compact_and_wait(broker, topic)

    async def run() -> None:
        aclient = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            reader = await aclient.create_reader(full, pulsar.MessageId.earliest, is_read_compacted=True)
            seen = {}
            while await reader.has_message_available():
                msg = await reader.read_next()
                seen[msg.partition_key()] = msg.data()
            assert seen == latest
            await reader.close()
            consumer = await aclient.subscribe(full, "async-view", is_read_compacted=True,
                                               initial_position=pulsar.InitialPosition.Earliest)
            got = {}
            for _ in range(len(latest)):
                msg = await asyncio.wait_for(consumer.receive(), 20)
                got[msg.partition_key()] = msg.data()
                await consumer.acknowledge(msg)
            assert got == latest
            await consumer.close()
        finally:
            await aclient.close()

    asyncio.run(run())


def test_durable_compacted_subscription_acknowledges_cumulatively(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    latest = produce_keyed(client, topic, 200, 10, 0)
    compact_and_wait(broker, topic)
    consumer = client.subscribe(full, "durable-view", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)
    msgs = [consumer.receive(timeout_millis=20_000) for _ in range(len(latest))]
    assert {m.partition_key(): m.data() for m in msgs} == latest

    def backlog() -> int:
        return int(call(broker.admin_url, "GET", P + topic + "/stats")[1]["subscriptions"]["durable-view"]["msgBacklog"])

    assert backlog() == 200  # the left-out messages are still unacknowledged in it
    consumer.acknowledge_cumulative(msgs[-1])
    assert wait_until(lambda: backlog() == 0)
    consumer.close()


def test_refused_second_consumer_does_not_turn_compaction_off(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    latest = produce_keyed(client, topic, 500, 50, 0)
    latest.update(produce_keyed(client, topic, 500, 1, 0))  # k0 500 times: the view has gaps
    compact_and_wait(broker, topic)
    first = client.subscribe(full, "only", is_read_compacted=True, receiver_queue_size=1,
                             initial_position=pulsar.InitialPosition.Earliest)
    got = [first.receive(timeout_millis=20_000)]
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(full, "only", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(len(latest) - 1):
        got.append(first.receive(timeout_millis=20_000))
        first.acknowledge(got[-1])
    assert {m.partition_key(): m.data() for m in got} == latest
    with pytest.raises(pulsar.Timeout):
        first.receive(timeout_millis=500)
    first.close()
