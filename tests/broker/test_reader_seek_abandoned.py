"""A reader's seek closes its consumer and keeps the non-durable subscription for its return;
a client that dies before returning (a Spark driver killed mid latest-offset check: the official
client seeks a reader started at the latest message inclusive) must leave nothing behind."""
from __future__ import annotations

import json
import urllib.request
import uuid

import pulsar

from letterbox.broker.topics.subscription import SOUGHT_GRACE_S
from letterbox.protocol import client_commands, pb
from tests.broker.test_robustness import RawConn, _encode
from tests.conftest import BrokerProcess, wait_until

T = pb.BaseCommand


def _subscriptions(broker: BrokerProcess, topic: str) -> dict[str, object]:
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/{path}/stats", timeout=10) as r:
        return dict(json.load(r)["subscriptions"])


def test_seek_then_client_gone_drops_the_non_durable_subscription(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/seek-gone-{uuid.uuid4().hex[:8]}"
    mid = client.create_producer(topic).send(b"one")
    raw = RawConn(broker.port)
    try:
        raw.handshake()
        raw.send(client_commands.subscribe(topic, "reader-gone", 1, 1, durable=False,
                                           start_message_id=(mid.ledger_id(), mid.entry_id())))
        raw.expect(T.SUCCESS)
        seek = pb.CommandSeek(consumer_id=1, request_id=2,
                              message_id=pb.MessageIdData(ledgerId=mid.ledger_id(), entryId=mid.entry_id()))
        raw.send(_encode(T(type=T.SEEK, seek=seek)))
        types = {raw.read_frame().type, raw.read_frame().type}
        assert types == {T.CLOSE_CONSUMER, T.SUCCESS}
        assert "reader-gone" in _subscriptions(broker, topic)  # kept for the reader's return
    finally:
        raw.close()  # ... which never comes
    assert wait_until(lambda: _subscriptions(broker, topic) == {}, timeout=SOUGHT_GRACE_S * 6, interval=0.2), (
        _subscriptions(broker, topic)
    )


def test_seek_then_reader_returns_keeps_reading(broker: BrokerProcess, client: pulsar.Client) -> None:
    """The official reader's seek still works, and reading after the grace is unaffected."""
    topic = f"persistent://public/default/seek-back-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        reader.seek(ids[1])
        assert reader.read_next(10_000).data() == b"m2"  # the reader's start is exclusive
        producer.send(b"m3")
        assert reader.read_next(10_000).data() == b"m3"
    finally:
        reader.close()
    assert wait_until(lambda: _subscriptions(broker, topic) == {}, timeout=30, interval=0.2)
