"""Publish backpressure (broker/connection/flow_control.py) on a real broker: a producer flooding SENDs
past maxPendingPublishRequestsPerConnection has its connection paused and resumed (the
/metrics counters say so) and every message is receipted and stored once, in order; bytes
awaiting storage past maxMessagePublishBufferSizeInMB pause another producer until they are
gone, and it then completes. No timing is asserted: states are polled with deadlines."""
from __future__ import annotations

import json
import re
import threading
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


def test_global_byte_limit_pauses_another_producer_and_releases_it(broker_factory: Any) -> None:
    """A raw connection holds 900 KiB of an unfinished 1 MiB SEND (under the 1 MB limit, so
    it is still read); a second producer's SEND pushes the total over: that producer stops
    being read and its sends wait. When the first SEND is completed (stored and receipted),
    the bytes are gone, the second producer resumes, and everything is stored once."""
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_MAX_MESSAGE_PUBLISH_BUFFER_SIZE_IN_MB": "1",
        "LETTERBOX_FRAME_TIMEOUT_SECONDS": "300",  # the held frame must not be timed out
    })
    topic = topic_name("global")
    raw = RawConn(broker.port)
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    sender: threading.Thread | None = None
    try:
        raw.handshake()
        raw.send(client_commands.producer(topic, 1, 1))
        name = raw.expect(T.PRODUCER_SUCCESS).command.producer_success.producer_name
        big = client_commands.send(1, 0, 1, _message(name, 0, b"B" * MB))
        held = 900 * 1024
        raw.send(big[:held])
        assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") >= held)
        assert metric(broker, "letterbox_connections_paused") == 0  # mid-frame: still read

        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=2000,
                                          block_if_queue_full=True)
        results: list[pulsar.Result] = []
        n = 1000

        def send_all() -> None:
            for i in range(n):
                producer.send_async(b"s-%04d-" % i + b"x" * 1000, lambda res, _id: results.append(res))
            producer.flush()

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 1, timeout=30)
        assert metric(broker, "letterbox_publish_buffer_pauses_total") >= 1
        # paused while the held bytes stay: its ~1 MB of sends cannot all have been read
        assert len(results) < n
        assert metric(broker, "letterbox_connections_paused") == 1

        raw.send(big[held:])  # complete the held SEND
        receipt = raw.expect(T.SEND_RECEIPT, timeout=30).command.send_receipt
        assert receipt.sequence_id == 0
        sender.join(60)
        assert not sender.is_alive()
        assert len(results) == n and all(r == pulsar.Result.Ok for r in results)
        assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 0)
        assert metric(broker, "letterbox_publish_buffer_bytes") == 0
        stored = read_all(client, topic)
        assert stored.count(b"B" * MB) == 1
        assert [m for m in stored if m.startswith(b"s-")] == [b"s-%04d-" % i + b"x" * 1000 for i in range(n)]
        assert len(stored) == n + 1
    finally:
        raw.close()
        client.close()
        if sender is not None:
            sender.join(5)


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
