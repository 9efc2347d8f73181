"""Publish backpressure (broker/connection/flow_control.py) on a real broker: a producer flooding SENDs
past maxPendingPublishRequestsPerConnection has its connection paused and resumed (the
/metrics counters say so) and every message is receipted and stored once, in order; bytes
awaiting storage past maxMessagePublishBufferSizeInMB pause the connection over its share while a producer
sending little is served, and everything then completes. No timing is asserted: states are polled with deadlines."""
from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import pulsar

from letterbox.protocol import client_commands, pb
from tests.broker.test_robustness import RawConn, _message, topic_name
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

T = pb.BaseCommand
MB = 1024 * 1024


def metric(broker: BrokerProcess, name: str) -> float:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def read_all(client: pulsar.Client, topic: str) -> list[bytes]:
    """Every message stored on `topic`, from the first to the last one the broker has."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    try:
        while reader.has_message_available():
            got.append(reader.read_next(timeout_millis=10_000).data())
    finally:
        reader.close()
    return got


def test_flooding_producer_is_paused_resumed_and_loses_nothing(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_MAX_PENDING_PUBLISH_REQUESTS_PER_CONNECTION": "8"})
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        topic = topic_name("flood")
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=1000,
                                          block_if_queue_full=True)
        results: list[pulsar.Result] = []
        n = 3000
        for i in range(n):
            producer.send_async(b"m-%05d" % i, lambda res, _id: results.append(res))
        producer.flush()
        assert len(results) == n and all(r == pulsar.Result.Ok for r in results)
        assert metric(broker, "letterbox_connection_read_pauses_total") >= 1
        assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 0)
        assert metric(broker, "letterbox_publish_buffer_bytes") == 0
        assert read_all(client, topic) == [b"m-%05d" % i for i in range(n)]
    finally:
        client.close()


def test_a_producer_sending_little_is_served_while_others_hold_the_buffer(broker_factory: Any) -> None:
    """The 1 MB publish buffer is shared fairly: two raw connections each send 900 KiB of an
    unfinished 1 MiB SEND; the second stops being read once the total is over the limit and
    it holds more than its share, yet a producer of small messages is served all along (every send receipted
    while the frames are held). When the first frame is completed and stored, the total is
    back under the limit, the paused connection is read again, and its frame completes too."""
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_MAX_MESSAGE_PUBLISH_BUFFER_SIZE_IN_MB": "1",
        "LETTERBOX_FRAME_TIMEOUT_SECONDS": "300",  # the held frames must not be timed out
    })
    topic = topic_name("fair")
    raws = [RawConn(broker.port), RawConn(broker.port)]
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        bigs = []
        held = 900 * 1024
        for i, raw in enumerate(raws):
            raw.handshake()
            raw.send(client_commands.producer(topic, 1, 1))
            name = raw.expect(T.PRODUCER_SUCCESS).command.producer_success.producer_name
            bigs.append(client_commands.send(1, 0, 1, _message(name, 0, bytes([65 + i]) * MB)))
            raw.send(bigs[i][:held])
            assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") >= held)
        # the second stops being read once it holds more than its share (512 KiB)
        assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 1)
        assert metric(broker, "letterbox_publish_buffer_bytes") > held + MB // 2

        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(200):  # each send waits for its receipt: served while the buffer is over
            producer.send(b"s-%04d" % i)
        assert metric(broker, "letterbox_connections_paused") == 1
        assert metric(broker, "letterbox_publish_buffer_bytes") > held + MB // 2

        for raw, big in zip(raws, bigs, strict=True):
            raw.send(big[held:])  # complete the held SENDs
        for raw in raws:
            assert raw.expect(T.SEND_RECEIPT, timeout=30).command.send_receipt.sequence_id == 0
        assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 0)
        assert metric(broker, "letterbox_publish_buffer_bytes") == 0
        stored = read_all(client, topic)
        assert stored.count(b"A" * MB) == 1 and stored.count(b"B" * MB) == 1
        assert [m for m in stored if m.startswith(b"s-")] == [b"s-%04d" % i for i in range(200)]
    finally:
        for raw in raws:
            raw.close()
        client.close()


def test_connection_gone_mid_frame_gives_its_bytes_back(broker_factory: Any) -> None:
    """A producer that goes away in the middle of a SEND gives its bytes back, so the
    total returns to zero (nothing leaks into later pauses)."""
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_MAX_MESSAGE_PUBLISH_BUFFER_SIZE_IN_MB": "1",
                                                "LETTERBOX_FRAME_TIMEOUT_SECONDS": "300"})
    raw = RawConn(broker.port)
    raw.handshake()
    raw.send(client_commands.producer(topic_name("gone"), 1, 1))
    raw.expect(T.PRODUCER_SUCCESS)
    raw.send(client_commands.send(1, 0, 1, _message("p", 0, b"B" * MB))[: 700 * 1024])
    assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") >= 700 * 1024)
    raw.close()
    assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") == 0, timeout=30)


def test_consumer_that_never_reads_gets_no_more_than_its_socket_holds(broker_factory: Any) -> None:
    """A backlog of 60 x 1 MiB and a raw consumer granting 1,000 permits that never reads its
    socket: dispatch stops once the connection's output is full (pause_writing) instead of
    building every permitted message in memory in one round; the consumer's pending map
    holds ids only, and the rest stays in storage."""
    broker: BrokerProcess = broker_factory()
    topic = topic_name("stuck")
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    raw = RawConn(broker.port)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        backlog = 60
        for i in range(backlog):
            producer.send(bytes([i]) * MB)
        raw.handshake()
        raw.send(client_commands.subscribe(topic, "stuck", 1, 1, sub_type=1, initial_position=1))
        raw.expect(T.SUCCESS)
        raw.send(client_commands.flow(1, 1000))  # ... and never read again
        path = topic.replace("persistent://", "")
        url = f"{broker.admin_url}/admin/v2/persistent/{path}/stats"

        def out() -> int:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return int(json.load(resp)["subscriptions"]["stuck"]["msgOutCounter"])

        # one dispatch round runs whole on the event loop before the stats request is served
        assert wait_until(lambda: out() > 0)
        sent = out()
        # socket buffers (a few MB each way) + the 4 MiB write buffer: far fewer than the 60 permitted
        assert sent < backlog // 2, sent
        producer.send(b"one more")  # a new message does not get past the full connection either
        assert out() == sent
    finally:
        raw.close()
        client.close()
