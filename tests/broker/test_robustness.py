"""Bad input over a raw socket: the offending request or connection fails with a
Pulsar error (or the connection is closed), and nothing else is affected.

Each case speaks the binary protocol through our own codec on a plain TCP
socket, then proves other clients are unaffected: a long-lived official-client
producer/consumer pair (opened once for the module) still round-trips, a fresh
official-client round trip works, and the broker process is still running.
"""
from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from letterbox.errors import ServerError
from letterbox.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    Frame,
    FrameDecoder,
    build_headers_and_payload,
    client_commands,
    pb,
)
from tests.conftest import BrokerProcess, _quiet_logger

T = pb.BaseCommand
READ_TIMEOUT = 10.0


def topic_name(prefix: str = "robust") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


class ConnectionClosed(Exception):
    """The broker closed (or reset) the connection."""


class RawConn:
    """A plain TCP connection speaking frames built by our codec."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
        self.decoder = FrameDecoder()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no data from the broker before the deadline")
        self.sock.settimeout(remaining)
        try:
            return self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return b""

    def read_frame(self, timeout: float = READ_TIMEOUT) -> Frame:
        """The next frame other than PING (answered with PONG) / PONG."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                if frame.type == T.PING:
                    self.send(_pong())
                    continue
                if frame.type == T.PONG:
                    continue
                return frame
            data = self._recv(deadline)
            if not data:
                raise ConnectionClosed()
            self.decoder.feed(data)

    def expect(self, type_: int, timeout: float = READ_TIMEOUT) -> Frame:
        frame = self.read_frame(timeout)
        assert frame.type == type_, f"expected {T.Type.Name(type_)}, got {frame!r}: {frame.command}"
        return frame

    def frames_until_closed(self, timeout: float = READ_TIMEOUT) -> list[Frame]:
        """Every frame received until the broker closes; fails if it stays open."""
        frames: list[Frame] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                frames.append(self.read_frame(max(0.0, deadline - time.monotonic())))
            except ConnectionClosed:
                return frames
            except TimeoutError:
                pytest.fail(f"broker did not close the connection within {timeout}s; got {frames}")

    def handshake(self) -> None:
        self.send(client_commands.connect("letterbox-robustness-test", 21))
        frame = self.expect(T.CONNECTED)
        assert frame.command.connected.protocol_version == 21

    def create_producer(self, topic: str, producer_id: int, request_id: int) -> None:
        self.send(client_commands.producer(topic, producer_id, request_id))
        frame = self.expect(T.PRODUCER_SUCCESS)
        assert frame.command.producer_success.request_id == request_id

    def ping_pong(self) -> list[Frame]:
        """The connection still answers: PING gets a PONG. The frames that came before it."""
        self.send(_encode(T(type=T.PING, ping=pb.CommandPing())))
        deadline = time.monotonic() + READ_TIMEOUT
        before: list[Frame] = []
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                if frame.type == T.PONG:
                    return before
                before.append(frame)
                continue
            data = self._recv(deadline)
            if not data:
                raise ConnectionClosed()
            self.decoder.feed(data)


def _encode(cmd: pb.BaseCommand) -> bytes:
    body = cmd.SerializeToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


def _pong() -> bytes:
    return _encode(T(type=T.PONG, pong=pb.CommandPong()))


def _message(producer_name: str, seq: int, payload: bytes) -> bytes:
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=seq, publish_time=int(time.time() * 1000)
    )
    return build_headers_and_payload(meta, payload)


def _read_all(client: pulsar.Client, topic: str, expected: int) -> list[bytes]:
    """Every message on `topic` from the start; waits for `expected`, then for silence."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        got = [reader.read_next(timeout_millis=10_000).data() for _ in range(expected)]
        with pytest.raises(pulsar.Timeout):
            got.append(reader.read_next(timeout_millis=500).data())
        return got
    finally:
        reader.close()


# ----------------------------------------------------------------- well-behaved clients


class Survivor:
    """An official-client producer + consumer kept open across all cases."""

    def __init__(self, url: str) -> None:
        self.client = pulsar.Client(url, operation_timeout_seconds=10, logger=_quiet_logger())
        self.topic = topic_name("survivor")
        self.consumer = self.client.subscribe(
            self.topic, "survivor", initial_position=pulsar.InitialPosition.Earliest
        )
        self.producer = self.client.create_producer(self.topic, batching_enabled=False)
        self.count = 0

    def round_trip(self) -> None:
        self.count += 1
        body = f"survivor-{self.count}".encode()
        self.producer.send(body)
        msg = self.consumer.receive(timeout_millis=10_000)
        assert msg.data() == body
        self.consumer.acknowledge(msg)

    def close(self) -> None:
        self.producer.close()
        self.consumer.close()
        self.client.close()


@pytest.fixture(scope="module")
def survivor(broker: BrokerProcess) -> Iterator[Survivor]:
    s = Survivor(broker.url)
    s.round_trip()
    yield s
    s.round_trip()
    s.close()


@pytest.fixture
def others_unaffected(broker: BrokerProcess, survivor: Survivor) -> Iterator[None]:
    """After the test body: the broker runs, the kept-open pair and a fresh pair work."""
    yield
    assert broker.proc is not None and broker.proc.poll() is None, broker.log()
    survivor.round_trip()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = topic_name("fresh")
        consumer = client.subscribe(topic, "fresh", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"fresh-round-trip")
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"fresh-round-trip"
        consumer.acknowledge(msg)
    finally:
        client.close()


@pytest.fixture
def raw(broker: BrokerProcess, others_unaffected: None) -> Iterator[RawConn]:
    conn = RawConn(broker.port)
    yield conn
    conn.close()


# ----------------------------------------------------------------- cases


GARBAGE = {
    "http-request": b"GET /admin/v2/clusters HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "zero-size-frame": b"\x00\x00\x00\x00" + b"\x00" * 16,
    "unparseable-command": struct.pack(">II", 12, 8) + b"\xff" * 8,
    "command-size-beyond-frame": struct.pack(">II", 8, 1000) + b"\x08\x02\x12\x00",
}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_before_connect_fails_the_connection(raw: RawConn, garbage: bytes) -> None:
    raw.send(garbage + client_commands.connect("late-connect", 21))
    frames = raw.frames_until_closed()
    # closed outright, at most after an ERROR; never a CONNECTED for the bytes after the garbage
    assert all(f.type == T.ERROR for f in frames), frames


def test_truncated_frame_then_client_closes(broker: BrokerProcess, raw: RawConn) -> None:
    raw.handshake()
    frame = client_commands.producer(topic_name(), 1, 1)
    raw.send(frame[: len(frame) // 2])
    raw.sock.shutdown(socket.SHUT_WR)
    # the broker answers the half-close by closing its side, without a reply to the fragment
    assert raw.frames_until_closed() == []
    # and a new connection is served normally
    again = RawConn(broker.port)
    try:
        again.handshake()
        again.create_producer(topic_name(), 1, 1)
    finally:
        again.close()


def test_truncated_frame_then_abrupt_close(broker: BrokerProcess, raw: RawConn) -> None:
    raw.handshake()
    frame = client_commands.producer(topic_name(), 1, 1)
    raw.send(frame[:7])
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()  # RST with a partial frame buffered on the broker side
    again = RawConn(broker.port)
    try:
        again.handshake()
        again.create_producer(topic_name(), 1, 1)
    finally:
        again.close()


@pytest.mark.parametrize("connected", [False, True], ids=["before-connect", "after-connect"])
def test_huge_frame_header_closes_without_waiting_for_the_bytes(raw: RawConn, connected: bool) -> None:
    if connected:
        raw.handshake()
    # claims 2 GiB; only the header and a few bytes ever arrive
    raw.send(struct.pack(">II", 2**31, 16) + b"\x08\x02")
    started = time.monotonic()
    frames = raw.frames_until_closed(timeout=5.0)
    assert time.monotonic() - started < 5.0
    assert all(f.type == T.ERROR for f in frames), frames


def test_just_over_frame_limit_closes(raw: RawConn) -> None:
    raw.handshake()
    raw.send(struct.pack(">I", DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING + 1) + b"\x00" * 64)
    frames = raw.frames_until_closed(timeout=5.0)
    assert all(f.type == T.ERROR for f in frames), frames


def test_bad_checksum_gets_send_error_and_stores_nothing(
    broker: BrokerProcess, raw: RawConn
) -> None:
    topic = topic_name("crc")
    raw.handshake()
    raw.create_producer(topic, producer_id=7, request_id=1)
    good = _message("crc-producer", 0, b"corrupted-in-transit")
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # flip a payload byte after the checksum was computed
    raw.send(client_commands.send(7, 0, 1, bytes(bad)))
    err = raw.expect(T.SEND_ERROR).command.send_error
    assert (err.producer_id, err.sequence_id) == (7, 0)
    assert err.error == ServerError.ChecksumError
    assert "checksum" in err.message.lower()
    # the same connection and producer keep working
    raw.send(client_commands.send(7, 1, 1, _message("crc-producer", 1, b"good")))
    receipt = raw.expect(T.SEND_RECEIPT).command.send_receipt
    assert (receipt.producer_id, receipt.sequence_id) == (7, 1)
    raw.ping_pong()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        assert _read_all(client, topic, expected=1) == [b"good"]
    finally:
        client.close()


def test_unknown_command_type_errors_or_closes(raw: RawConn) -> None:
    raw.handshake()
    body = b"\x08\xe7\x07"  # BaseCommand.type (field 1) = 999, not in the enum
    raw.send(struct.pack(">II", len(body) + 4, len(body)) + body)
    try:
        frame = raw.read_frame()
    except ConnectionClosed:
        return  # clean close is acceptable
    assert frame.type == T.ERROR, frame
    assert frame.command.error.error in {int(e) for e in ServerError}
    raw.ping_pong()  # an ERROR means the connection must still be usable


def test_unknown_command_type_before_connect_closes(raw: RawConn) -> None:
    body = b"\x08\xe7\x07"
    raw.send(struct.pack(">II", len(body) + 4, len(body)) + body)
    frames = raw.frames_until_closed()
    assert all(f.type == T.ERROR for f in frames), frames


@pytest.mark.parametrize(
    "command",
    [
        client_commands.producer(topic_name(), 1, 1),
        client_commands.subscribe(topic_name(), "sub", 1, 1),
        client_commands.lookup(topic_name(), 1),
        client_commands.send(1, 0, 1, _message("p", 0, b"x")),
    ],
    ids=["producer", "subscribe", "lookup", "send"],
)
def test_command_before_connect_closes(raw: RawConn, command: bytes) -> None:
    raw.send(command)
    frames = raw.frames_until_closed()
    assert all(f.type == T.ERROR for f in frames), frames


def test_second_connect_closes(raw: RawConn) -> None:
    raw.handshake()
    raw.send(client_commands.connect("again", 21))
    frames = raw.frames_until_closed()
    assert all(f.type == T.ERROR for f in frames), frames


def test_send_for_unknown_producer_gets_send_error(raw: RawConn) -> None:
    raw.handshake()
    raw.send(client_commands.send(42, 5, 1, _message("ghost", 5, b"nobody-home")))
    err = raw.expect(T.SEND_ERROR).command.send_error
    assert (err.producer_id, err.sequence_id) == (42, 5)
    assert err.error == ServerError.NotAllowedError
    assert "producer" in err.message.lower()
    raw.create_producer(topic_name(), producer_id=42, request_id=1)  # connection still usable


def test_send_without_payload_gets_send_error(raw: RawConn) -> None:
    raw.handshake()
    raw.create_producer(topic_name(), producer_id=1, request_id=1)
    raw.send(_encode(T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=3))))
    err = raw.expect(T.SEND_ERROR).command.send_error
    assert (err.producer_id, err.sequence_id) == (1, 3)
    assert err.error != ServerError.UnknownError
    raw.send(client_commands.send(1, 4, 1, _message("p", 4, b"ok")))
    assert raw.expect(T.SEND_RECEIPT).command.send_receipt.sequence_id == 4


def test_oversized_payload_gets_send_error_and_connection_stays_usable(
    broker: BrokerProcess, raw: RawConn
) -> None:
    topic = topic_name("big")
    raw.handshake()
    raw.create_producer(topic, producer_id=3, request_id=1)
    big = _message("big-producer", 0, b"x" * (DEFAULT_MAX_MESSAGE_SIZE + 1))
    frame = client_commands.send(3, 0, 1, big)
    assert len(frame) - 4 <= DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING  # under the frame limit
    raw.send(frame)
    err = raw.expect(T.SEND_ERROR, timeout=30).command.send_error
    assert (err.producer_id, err.sequence_id) == (3, 0)
    assert err.error == ServerError.NotAllowedError
    assert str(DEFAULT_MAX_MESSAGE_SIZE) in err.message
    raw.send(client_commands.send(3, 1, 1, _message("big-producer", 1, b"small")))
    receipt = raw.expect(T.SEND_RECEIPT).command.send_receipt
    assert (receipt.producer_id, receipt.sequence_id) == (3, 1)
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        assert _read_all(client, topic, expected=1) == [b"small"]
    finally:
        client.close()


INVALID_TOPICS = {
    "empty": "",
    "bad-domain": "bogus://public/default/t",
    "two-segments": "public/default",
    "four-segments": "a/b/c/d",
    "empty-local": "persistent://public/default/",
    "empty-namespace": "persistent://public//t",
    "space-in-tenant": "persistent://pub lic/default/t",
}


@pytest.mark.parametrize("bad", list(INVALID_TOPICS.values()), ids=list(INVALID_TOPICS))
def test_invalid_topic_names_get_invalid_topic_name(raw: RawConn, bad: str) -> None:
    raw.handshake()
    raw.send(client_commands.producer(bad, 1, 10))
    err = raw.expect(T.ERROR).command.error
    assert (err.request_id, err.error) == (10, ServerError.InvalidTopicName), err
    assert err.message

    raw.send(client_commands.subscribe(bad, "sub", 1, 11))
    err = raw.expect(T.ERROR).command.error
    assert (err.request_id, err.error) == (11, ServerError.InvalidTopicName), err

    raw.send(client_commands.lookup(bad, 12))
    lookup = raw.expect(T.LOOKUP_RESPONSE).command.lookupTopicResponse
    assert lookup.request_id == 12
    assert lookup.response == pb.CommandLookupTopicResponse.Failed
    assert lookup.error == ServerError.InvalidTopicName

    raw.send(client_commands.partitioned_metadata(bad, 13))
    meta = raw.expect(T.PARTITIONED_METADATA_RESPONSE).command.partitionMetadataResponse
    assert meta.request_id == 13
    assert meta.response == pb.CommandPartitionedTopicMetadataResponse.Failed
    assert meta.error == ServerError.InvalidTopicName

    # the connection is still usable, including the ids the failed requests used
    topic = topic_name("valid")
    raw.create_producer(topic, producer_id=1, request_id=14)
    raw.send(client_commands.subscribe(topic, "sub", 1, 15))
    ok = raw.expect(T.SUCCESS).command.success
    assert ok.request_id == 15
