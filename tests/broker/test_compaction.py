"""Topic compaction (issue 15 item 3) through the official client over TCP: trigger and
status over HTTP, a compacted reader sees the latest message per key (a tombstone sent on its
own is its key's latest, as Apache Pulsar 4.0 keeps it; keyless messages are left out), a non-compacted reader sees every message, a consumer
with is_read_compacted reads the view then the rest of the topic, the compactionThreshold
namespace policy compacts on its own, and bad requests get clear errors."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default/"
NS = "/admin/v2/namespaces/public/default"


def _topic() -> str:
    return f"compact-{uuid.uuid4().hex[:8]}"


def produce_keyed(client: pulsar.Client, topic: str, n: int, keys: int, tombstones: int) -> dict[str, bytes]:
    """n messages round-robin over `keys` keys, then an empty payload (a tombstone, an entry
    of its own) for the first `tombstones` keys; returns the latest message of every key as
    the compacted view holds it: b"" for a tombstoned key (see `alive`)."""
    producer = client.create_producer(f"persistent://public/default/{topic}", batching_enabled=False,
                                      block_if_queue_full=True)
    latest: dict[str, bytes] = {}
    failures: list[object] = []

    def sent(result: object, _msg_id: object) -> None:
        if result != pulsar.Result.Ok:
            failures.append(result)

    for i in range(n):
        key = f"k{i % keys}"
        value = f"{key}-v{i}".encode()
        producer.send_async(value, sent, partition_key=key)
        latest[key] = value
    for t in range(tombstones):
        producer.send_async(b"", sent, partition_key=f"k{t}")
        latest[f"k{t}"] = b""
    producer.flush()
    producer.close()
    assert not failures, failures[:3]
    return latest


def alive(latest: dict[str, bytes]) -> dict[str, bytes]:
    """The keys a table view holds: those whose latest message is not a tombstone."""
    return {k: v for k, v in latest.items() if v}


def compact_and_wait(broker: BrokerProcess, topic: str, timeout: float = 60.0) -> dict[str, Any]:
    status, body = call(broker.admin_url, "PUT", P + topic + "/compaction")
    assert status == 204, body
    done: dict[str, Any] = {}

    def finished() -> bool:
        code, state = call(broker.admin_url, "GET", P + topic + "/compaction")
        assert code == 200, state
        done.update(state)
        return state["status"] in ("SUCCESS", "ERROR")

    assert wait_until(finished, timeout=timeout), done
    return done


def read_all(client: pulsar.Client, topic: str, compacted: bool) -> list[pulsar.Message]:
    """Everything a reader from the earliest message gets, up to the last message the broker
    names (GetLastMessageId: for a compacted reader, the view's last when nothing follows)."""
    reader = client.create_reader(f"persistent://public/default/{topic}", pulsar.MessageId.earliest,
                                  is_read_compacted=compacted, receiver_queue_size=1000)
    out: list[pulsar.Message] = []
    try:
        while reader.has_message_available():
            out.append(reader.read_next(timeout_millis=20_000))
        return out
    finally:
        reader.close()


def test_compacted_reader_sees_the_80_latest_values_and_20_tombstones(broker: BrokerProcess,
                                                                      client: pulsar.Client) -> None:
    topic = _topic()
    # a subscription that has not read anything keeps the topic's entries (retention 0)
    keeper = client.subscribe(f"persistent://public/default/{topic}", "keeper",
                              initial_position=pulsar.InitialPosition.Earliest)
    latest = produce_keyed(client, topic, 10_000, 100, 20)
    assert len(alive(latest)) == 80
    assert call(broker.admin_url, "GET", P + topic + "/compaction")[1] == {"status": "NOT_RUN", "lastError": ""}
    assert compact_and_wait(broker, topic) == {"status": "SUCCESS", "lastError": ""}
    got = read_all(client, topic, compacted=True)
    assert {m.partition_key(): m.data() for m in got} == latest
    assert len(got) == 100
    everything = read_all(client, topic, compacted=False)
    assert len(everything) == 10_020
    assert [m.data() for m in everything[-20:]] == [b""] * 20
    keeper.close()


def test_compacted_consumer_reads_the_view_then_the_rest(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    latest = produce_keyed(client, topic, 300, 10, 2)
    producer = client.create_producer(full, batching_enabled=False)
    producer.send(b"no key")  # left out of the view, as Pulsar does
    compact_and_wait(broker, topic)
    producer.send(b"after-1", partition_key="k5")
    producer.send(b"after-2")
    consumer = client.subscribe(full, "compacted", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = []
    for _ in range(len(latest) + 2):
        msg = consumer.receive(timeout_millis=20_000)
        got.append((msg.partition_key(), msg.data()))
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):  # nothing more: superseded and keyless messages are left out
        consumer.receive(timeout_millis=500)
    view = sorted(got[:-2])
    assert view == sorted(latest.items())
    assert got[-2:] == [("k5", b"after-1"), ("", b"after-2")]
    consumer.close()
    producer.close()


def test_read_compacted_refused_on_shared(broker: BrokerProcess, client: pulsar.Client) -> None:
    """The official client refuses it itself (the broker refuses it too, with NotAllowed)."""
    full = f"persistent://public/default/{_topic()}"
    with pytest.raises(pulsar.InvalidConfiguration):
        client.subscribe(full, "shared", consumer_type=pulsar.ConsumerType.Shared, is_read_compacted=True)


def test_compaction_bad_input(broker: BrokerProcess) -> None:
    status, body = call(broker.admin_url, "PUT", P + "no-such-topic/compaction")
    assert status == 404 and "not found" in body["reason"], body
    status, body = call(broker.admin_url, "GET", P + "no-such-topic/compaction")
    assert status == 404, body
    status, body = call(broker.admin_url, "POST", NS + "/compactionThreshold", '"big"')
    assert status == 400 and "integer" in body["reason"], body
    status, body = call(broker.admin_url, "POST", NS + "/compactionThreshold", "-1")
    assert status == 412 and "0 or more" in body["reason"], body
    status, body = call(broker.admin_url, "GET", NS + "/compactionThreshold")
    assert status == 204, body  # unset
    status, body = call(broker.admin_url, "POST", "/admin/v2/namespaces/public/nope/compactionThreshold", "5")
    assert status == 404, body


def test_second_trigger_while_running_is_refused(broker_factory: Any) -> None:
    broker = broker_factory(env={"LETTERBOX_COMPACTION_CHUNK_ENTRIES": "1"})
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    try:
        topic = _topic()
        produce_keyed(client, topic, 3000, 3000, 0)
        assert call(broker.admin_url, "PUT", P + topic + "/compaction")[0] == 204
        status, body = call(broker.admin_url, "PUT", P + topic + "/compaction")
        assert status == 409 and "already in progress" in body["reason"], body
        assert call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "RUNNING"
        assert wait_until(lambda: call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "SUCCESS",
                          timeout=120)
    finally:
        client.close()


def test_compaction_threshold_triggers_compaction(broker_factory: Any) -> None:
    broker = broker_factory(env={"LETTERBOX_COMPACTION_MONITOR_INTERVAL_SECONDS": "1"})
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    try:
        status, body = call(broker.admin_url, "POST", NS + "/compactionThreshold", "10000")
        assert status == 204, body
        assert call(broker.admin_url, "GET", NS + "/compactionThreshold") == (200, 10000)
        topic = _topic()
        latest = produce_keyed(client, topic, 50, 5, 0)  # well under 10,000 bytes
        small = wait_until(lambda: call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] != "NOT_RUN",
                           timeout=3)
        assert not small, "compacted below the threshold"
        latest.update(produce_keyed(client, topic, 1000, 5, 0))  # past it
        assert wait_until(lambda: call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "SUCCESS",
                          timeout=30)
        got = read_all(client, topic, compacted=True)
        assert {m.partition_key(): m.data() for m in got} == latest
        assert call(broker.admin_url, "DELETE", NS + "/compactionThreshold")[0] == 204
        assert call(broker.admin_url, "GET", NS + "/compactionThreshold")[0] == 204
    finally:
        client.close()


def test_table_view_is_built_on_the_compacted_topic(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    latest = produce_keyed(client, topic, 2000, 50, 5)
    compact_and_wait(broker, topic)
    table = client.create_table_view(full)
    try:
        seen: dict[str, bytes] = {}
        table.for_each(lambda key, value: seen.__setitem__(key, value))
        assert seen == alive(latest)
        producer = client.create_producer(full, batching_enabled=False)
        producer.send(b"fresh", partition_key="k10")
        producer.send(b"", partition_key="k11")  # a tombstone after the horizon
        producer.close()
        assert wait_until(lambda: table.get("k10") == b"fresh" and table.get("k11") is None)
    finally:
        table.close()


@pytest.mark.parametrize("compression", [pulsar.CompressionType.NONE, pulsar.CompressionType.LZ4])
def test_batches_keep_their_latest_messages(broker: BrokerProcess, client: pulsar.Client,
                                            compression: pulsar.CompressionType) -> None:
    """A batch holding latest values and superseded ones is kept with the superseded ones
    marked compacted_out: the reader gets only the latest, under their original ids."""
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    producer = client.create_producer(full, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=1000, compression_type=compression)
    ids: dict[str, Any] = {}
    for i in range(100):
        key = f"k{i % 7}"
        producer.send_async(f"{key}-{i}".encode(), lambda r, mid, key=key: ids.__setitem__(key, mid),
                            partition_key=key)
    producer.flush()
    producer.close()
    compact_and_wait(broker, topic)
    got = read_all(client, topic, compacted=True)
    assert sorted((m.partition_key(), m.data()) for m in got) == sorted(
        (f"k{k}", f"k{k}-{max(i for i in range(100) if i % 7 == k)}".encode()) for k in range(7))
    assert {m.partition_key(): str(m.message_id()) for m in got} == {k: str(v) for k, v in ids.items()}


def test_every_key_removed_leaves_only_tombstones(broker: BrokerProcess, client: pulsar.Client) -> None:
    """All keys tombstoned: a compacted reader gets the tombstones, then nothing is available,
    and a TableView starts empty instead of waiting forever."""
    topic = _topic()
    assert produce_keyed(client, topic, 10, 2, 2) == {"k0": b"", "k1": b""}
    compact_and_wait(broker, topic)
    assert [(m.partition_key(), m.data()) for m in read_all(client, topic, compacted=True)] == [
        ("k0", b""), ("k1", b"")]
    table = client.create_table_view(f"persistent://public/default/{topic}")
    try:
        seen: dict[str, bytes] = {}
        table.for_each(lambda key, value: seen.__setitem__(key, value))
        assert seen == {}
    finally:
        table.close()


def test_compacted_reader_receives_the_last_tombstone_then_has_nothing_available(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    """A topic whose last message is a tombstone, as Apache Pulsar 4.0.8 answers it: a
    tombstone sent as an entry of its own stays in the compacted view as its key's latest
    message, so a read_compacted reader receives the deletion (under its original id) as its
    last message and has_message_available() then turns false; the value it deleted is
    gone, and a tombstone before the last one is kept the same way."""
    topic = _topic()
    full = f"persistent://public/default/{topic}"
    keeper = client.subscribe(full, "keeper", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(full, batching_enabled=False)
    producer.send(b"v1", partition_key="k1")
    producer.send(b"v2", partition_key="k2")
    deleted_k2 = producer.send(b"", partition_key="k2")
    deleted_k1 = producer.send(b"", partition_key="k1")
    producer.close()
    compact_and_wait(broker, topic)
    reader = client.create_reader(full, pulsar.MessageId.earliest, is_read_compacted=True)
    try:
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(timeout_millis=10_000))
        assert [(m.partition_key(), m.data(), str(m.message_id())) for m in got] == [
            ("k2", b"", str(deleted_k2)), ("k1", b"", str(deleted_k1))]
        assert not reader.has_message_available()
    finally:
        reader.close()
        keeper.close()
