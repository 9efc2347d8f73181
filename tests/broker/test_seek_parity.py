"""Seek and readers as Apache Pulsar answers them, through the official client (sync
and pulsar.asyncio): time seeks after id seeks, reader seek to earliest, inclusive
readers at latest, and has_message_available() after seek(latest) and a new publish."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pulsar
import pulsar.asyncio as pulsar_asyncio

from tests.conftest import BrokerProcess, _quiet_logger

RETAIN_ALL = {"LETTERBOX_RETENTION_TIME_MINUTES": "-1"}


def topic_name(prefix: str = "seekp") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def publish(client: pulsar.Client, topic: str, bodies: list[bytes]) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    try:
        return [producer.send(b) for b in bodies]
    finally:
        producer.close()


def drain(receive: object, timeout_ms: int = 700, expect: int = 0) -> list[bytes]:
    """Everything `receive` gives until `timeout_ms` of silence; the first `expect` messages
    get 10 s each (after a seek the consumer reconnects first, slow on a loaded machine)."""
    out = []
    while True:
        try:
            out.append(receive(10_000 if len(out) < expect else timeout_ms).data())  # type: ignore[operator]
        except pulsar.Timeout:
            return out


def wait_past(mark_ms: int) -> None:
    """Return once the wall clock is past `mark_ms` (publish times are in ms)."""
    deadline = time.monotonic() + 5
    while int(time.time() * 1000) <= mark_ms and time.monotonic() < deadline:
        time.sleep(0.005)


def test_consumer_seek_by_time_after_seeks_by_id(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Retention keeps what a seek by id moves past: without it letterbox deletes acknowledged
    entries at once (docs/compatibility.md), so there would be nothing to seek back to."""
    broker = broker_factory(env=RETAIN_ALL)
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        _seek_by_time_after_seeks_by_id(client)
    finally:
        client.close()


def _seek_by_time_after_seeks_by_id(client: pulsar.Client) -> None:
    topic = topic_name()
    early = publish(client, topic, [b"e0", b"e1", b"e2"])
    wait_past(int(time.time() * 1000))
    mark = int(time.time() * 1000)
    wait_past(mark)
    publish(client, topic, [b"l0", b"l1"])
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    try:
        assert drain(consumer.receive, expect=5) == [b"e0", b"e1", b"e2", b"l0", b"l1"]
        consumer.seek(early[0])  # by id: resumes after e0
        assert drain(consumer.receive, expect=4) == [b"e1", b"e2", b"l0", b"l1"]
        consumer.seek(early[2])
        assert drain(consumer.receive, expect=2) == [b"l0", b"l1"]
        consumer.seek(mark)  # by time: the first message published at or after it
        assert drain(consumer.receive, expect=2) == [b"l0", b"l1"]
        consumer.seek(early[1])
        consumer.seek(0)
        assert drain(consumer.receive, expect=5) == [b"e0", b"e1", b"e2", b"l0", b"l1"]
    finally:
        consumer.close()


def test_reader_seek_earliest_after_reading(client: pulsar.Client) -> None:
    topic = topic_name()
    publish(client, topic, [b"0", b"1", b"2"])
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        assert drain(reader.read_next, expect=3) == [b"0", b"1", b"2"]
        reader.seek(pulsar.MessageId.earliest)
        assert reader.has_message_available()
        assert drain(reader.read_next, expect=3) == [b"0", b"1", b"2"]
    finally:
        reader.close()


def test_reader_at_latest_inclusive_gets_last_message(client: pulsar.Client) -> None:
    topic = topic_name()
    publish(client, topic, [b"0", b"1", b"last"])
    inclusive = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    exclusive = client.create_reader(topic, pulsar.MessageId.latest)
    try:
        assert inclusive.has_message_available()
        assert inclusive.read_next(10_000).data() == b"last"
        assert not inclusive.has_message_available()
        assert not exclusive.has_message_available()
        assert drain(exclusive.read_next, 500) == []
    finally:
        inclusive.close()
        exclusive.close()


def test_has_message_available_after_seek_latest_and_publish(client: pulsar.Client) -> None:
    topic = topic_name()
    publish(client, topic, [b"0", b"1"])
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    try:
        assert reader.has_message_available()
        reader.seek(pulsar.MessageId.latest)
        assert not reader.has_message_available()
        producer.send(b"new")
        assert reader.has_message_available()
        assert reader.read_next(10_000).data() == b"new"
        assert not reader.has_message_available()
        reader.seek(pulsar.MessageId.earliest)
        assert reader.has_message_available()
        assert drain(reader.read_next, expect=3) == [b"0", b"1", b"new"]
    finally:
        producer.close()
        reader.close()


def test_seek_and_readers_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    async def drain_async(read: object, timeout: float = 0.7, expect: int = 0) -> list[bytes]:
        out = []
        while True:
            try:
                msg = await asyncio.wait_for(read(), 10 if len(out) < expect else timeout)  # type: ignore[operator]
            except TimeoutError:
                return out
            out.append(msg.data())

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        topic = topic_name("aseek")
        try:
            producer = await client.create_producer(topic, batching_enabled=False)
            ids = [await producer.send(b) for b in (b"0", b"1", b"2")]
            # a send and its receipt fit in one millisecond (0.4 ms measured): b"2" may carry
            # the very ms read next, and a seek by time includes publish time == mark. So
            # the mark is taken only once the clock has left b"2"'s ms, and b"3" is sent in
            # a later ms than the mark (as the sync test above does)
            await asyncio.to_thread(wait_past, int(time.time() * 1000))
            mark = int(time.time() * 1000)
            await asyncio.to_thread(wait_past, mark)
            await producer.send(b"3")
            reader = await client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
            assert await reader.has_message_available()
            assert (await reader.read_next()).data() == b"3"
            assert not await reader.has_message_available()
            await reader.seek(pulsar.MessageId.wrap(pulsar.MessageId.earliest))
            assert await reader.has_message_available()
            assert [(await reader.read_next()).data() for _ in range(4)] == [b"0", b"1", b"2", b"3"]
            await reader.close()
            # (an inclusive reader sought to latest has the last message available, as in Pulsar)
            reader = await client.create_reader(topic, pulsar.MessageId.earliest)
            await reader.seek(pulsar.MessageId.wrap(pulsar.MessageId.latest))
            assert not await reader.has_message_available()
            await producer.send(b"4")
            assert await reader.has_message_available()
            await reader.close()

            consumer = await client.subscribe(topic, "as", initial_position=pulsar.InitialPosition.Earliest)
            await consumer.seek(ids[1] if isinstance(ids[1], pulsar.MessageId) else pulsar.MessageId.wrap(ids[1]))
            assert (await consumer.receive()).data() == b"2"
            await consumer.seek(mark)
            got = await drain_async(consumer.receive, expect=2)
            assert got == [b"3", b"4"]
            await consumer.close()
            await producer.close()
        finally:
            await client.close()

    asyncio.run(run())


def _internal_entries(b: BrokerProcess, topic: str) -> int:
    from tests.admin.helpers import call

    status, body = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/") + "/internalStats")
    assert status == 200, body
    return int(body["numberOfEntries"])


def _acked_and_trimmed(b: BrokerProcess, topic: str, sub: str) -> None:
    """Wait until the broker has every ack of `sub` (no backlog), then trim now (the trim
    decides its cut at once: what it keeps is what a seek back can replay)."""
    from tests.admin.helpers import call
    from tests.conftest import wait_until

    path = "/admin/v2/" + topic.replace("://", "/")

    def no_backlog() -> bool:
        status, body = call(b.admin_url, "GET", path + "/stats")
        return status == 200 and body["subscriptions"][sub]["msgBacklog"] == 0

    assert wait_until(no_backlog)
    assert call(b.admin_url, "POST", path + "/trim")[0] == 204


def test_seek_back_replays_a_message_acknowledged_moments_ago(broker_factory: Callable[..., BrokerProcess]) -> None:
    """The Python client's pulsar_test.test_seek ("replay after a fix"), as Apache Pulsar
    answers it with its defaults (no retention): acknowledged entries stay until their
    ledger rolls over, so a consumer that acked every message can seek back and receive
    them again. letterbox keeps acknowledged entries for acked_replay_minutes, 10 by
    default (the broker's default, which test brokers turn off unless asked)."""
    from letterbox.config import BrokerConfig
    from tests.conftest import REPLAY_WINDOW

    assert REPLAY_WINDOW["LETTERBOX_ACKED_REPLAY_MINUTES"] == str(BrokerConfig().acked_replay_minutes)
    b = broker_factory(env=REPLAY_WINDOW)
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = topic_name("replay")
        consumer = client.subscribe(topic, "fix", consumer_type=pulsar.ConsumerType.Shared)
        ids = publish(client, topic, [b"m0", b"m1", b"m2"])
        for _ in ids:
            consumer.acknowledge(consumer.receive(10_000))
        _acked_and_trimmed(b, topic, "fix")
        assert _internal_entries(b, topic) == 3
        consumer.seek(pulsar.MessageId.earliest)
        assert drain(consumer.receive, expect=3) == [b"m0", b"m1", b"m2"]
        consumer.close()
    finally:
        client.close()


def test_acknowledged_entries_go_after_the_replay_window_or_beyond_its_entry_cap(tmp_path: object) -> None:
    """The replay window is bounded: entries older than acked_replay_minutes go at the next
    trim (broker time, the manual clock here), and at most acked_replay_max_entries of the
    newest acknowledged entries are kept meanwhile."""
    from pathlib import Path

    from tests.admin.helpers import call

    b = BrokerProcess(Path(str(tmp_path)) / "d", env={"LETTERBOX_ACKED_REPLAY_MINUTES": "10",
                                                      "LETTERBOX_ACKED_REPLAY_MAX_ENTRIES": "2"},
                      args=["--clock", "manual", "--allow-test-clock"]).start()
    c = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = topic_name("bounded")
        consumer = c.subscribe(topic, "s")
        publish(c, topic, [b"a", b"b", b"c", b"d", b"e"])
        for _ in range(5):
            consumer.acknowledge(consumer.receive(10_000))
        _acked_and_trimmed(b, topic, "s")
        assert _internal_entries(b, topic) == 2  # the cap: the two newest stay
        status, body = call(b.admin_url, "POST", f"/admin/v2/letterbox/clock/advance?ms={11 * 60_000}")
        assert status == 200, body
        _acked_and_trimmed(b, topic, "s")
        assert _internal_entries(b, topic) == 0  # past the window
    finally:
        c.close()
        b.stop()
