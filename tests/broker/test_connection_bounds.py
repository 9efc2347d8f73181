"""Bounds on connections: a frame left unfinished (slowloris) and a connection
that never sends CONNECT are closed by their time limits and the broker's
memory comes back; connections over brokerMaxConnections(PerIp) are closed at
accept while the ones already open keep working; reading pauses under
backpressure and resumes without losing a message."""
from __future__ import annotations

import select
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.broker.test_flow_control import metric
from tests.broker.test_robustness import ConnectionClosed, RawConn, topic_name
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

T = pb.BaseCommand
SLOWLORIS = 200
MB = 1024 * 1024


def rss_kb(broker: BrokerProcess, field: str = "VmRSS") -> int:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc status")


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the broker has closed `sock` (EOF or reset), without blocking."""
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return False
    try:
        return sock.recv(65536) == b"" or closed_by_peer(sock)
    except (ConnectionResetError, BrokenPipeError):
        return True


def wait_all_closed(socks: list[socket.socket], timeout: float) -> float:
    started = time.monotonic()
    open_ = list(socks)
    while open_ and time.monotonic() - started < timeout:
        open_ = [s for s in open_ if not closed_by_peer(s)]
        time.sleep(0.05)
    assert not open_, f"{len(open_)} of {len(socks)} connections still open after {timeout}s"
    return time.monotonic() - started


def connected_socket(port: int) -> socket.socket:
    conn = RawConn(port)
    conn.handshake()
    return conn.sock


def test_slowloris_connections_are_closed_by_the_frame_time_limit(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_FRAME_TIMEOUT_SECONDS": "2", "LETTERBOX_CONNECT_TIMEOUT_SECONDS": "120",
    })
    start_rss = rss_kb(broker)
    socks = [connected_socket(broker.port) for _ in range(SLOWLORIS)]
    partial = struct.pack(">II", 5 * MB, 20) + b"\x08" * (64 * 1024)  # claims 5 MB, sends 64 KB
    for s in socks:
        s.sendall(partial)
    took = wait_all_closed(socks, timeout=30)
    for s in socks:
        s.close()
    # a well-behaved client is served all along and afterwards
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = topic_name("after-slowloris")
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"still served")
        assert consumer.receive(timeout_millis=10_000).data() == b"still served"
    finally:
        client.close()
    end_rss = rss_kb(broker)
    assert end_rss - start_rss < 50 * 1024, (start_rss, end_rss, f"closed after {took:.1f}s")
    assert wait_until(lambda: "a frame stayed incomplete for 2.0s" in broker.log()), broker.log()[-2000:]


def test_a_connection_without_connect_is_closed_by_the_connect_time_limit(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_CONNECT_TIMEOUT_SECONDS": "1"})
    silent = socket.create_connection(("127.0.0.1", broker.port))
    try:
        took = wait_all_closed([silent], timeout=20)
        assert took >= 0.9
    finally:
        silent.close()
    assert wait_until(lambda: "no CONNECT within 1.0s" in broker.log()), broker.log()
    # a client that does connect is not affected, even when idle past the limit
    conn = RawConn(broker.port)
    conn.handshake()
    time.sleep(1.5)  # longer than the CONNECT limit: an established connection stays
    conn.ping_pong()
    conn.close()


@pytest.mark.parametrize(("setting", "limit"), [
    ("LETTERBOX_BROKER_MAX_CONNECTIONS_PER_IP", 3),
    ("LETTERBOX_BROKER_MAX_CONNECTIONS", 3),
])
def test_connections_over_the_limit_are_closed_at_accept(broker_factory: Any, setting: str, limit: int) -> None:
    broker: BrokerProcess = broker_factory(env={setting: str(limit)})
    admitted = [RawConn(broker.port) for _ in range(limit)]
    for conn in admitted:
        conn.handshake()
    refused = RawConn(broker.port)
    refused.send(client_commands.connect("over-the-limit", 21))
    with pytest.raises(ConnectionClosed):
        refused.read_frame(timeout=10)
    refused.close()
    for conn in admitted:
        conn.ping_pong()
    # a slot freed is a slot available again
    admitted.pop().close()
    deadline = time.monotonic() + 10
    while True:
        again = RawConn(broker.port)
        try:
            again.handshake()
            break
        except (ConnectionClosed, OSError):
            again.close()
            assert time.monotonic() < deadline, "no connection admitted after one closed"
            time.sleep(0.1)
    again.close()
    for conn in admitted:
        conn.close()
    assert wait_until(lambda: "reached brokerMaxConnections" in broker.log()), broker.log()


def test_backpressure_pauses_reading_and_loses_nothing(broker_factory: Any) -> None:
    """With one pending publish allowed per connection, a pipelined burst is read in
    steps (reading paused and resumed) and every message is stored once, in order."""
    broker: BrokerProcess = broker_factory(env={"LETTERBOX_MAX_PENDING_PUBLISH_REQUESTS_PER_CONNECTION": "1"})
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        topic = topic_name("backpressure")
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=500)
        sent = []
        for i in range(300):
            producer.send_async(b"m-%d" % i, lambda res, _id: sent.append(res))
        producer.flush()
        assert len(sent) == 300 and all(r == pulsar.Result.Ok for r in sent)
        got = [consumer.receive(timeout_millis=10_000).data() for _ in range(300)]
        assert got == [b"m-%d" % i for i in range(300)]
    finally:
        client.close()


def test_a_paused_connection_whose_client_dies_is_closed_and_its_bytes_given_back(broker_factory: Any) -> None:
    """Connections holding large unfinished frames are paused (not read) once the shared
    buffer is over; a client that dies then (RST) is noticed by the broker within seconds,
    not at the frame timeout, and every byte it held is given back."""
    broker: BrokerProcess = broker_factory(env={
        "LETTERBOX_MAX_MESSAGE_PUBLISH_BUFFER_SIZE_IN_MB": "1", "LETTERBOX_FRAME_TIMEOUT_SECONDS": "300",
    })
    claim = struct.pack(">II", 5 * MB, 20)  # frames that claim 5 MB
    first = connected_socket(broker.port)
    first.sendall(claim + b"\x08" * (900 * 1024))  # the largest unfinished frame: read on
    assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") >= 900 * 1024)
    socks = [connected_socket(broker.port) for _ in range(3)]
    for s in socks:  # over the 1 MB buffer and over their share: paused
        s.sendall(claim + b"\x08" * (600 * 1024))
    assert wait_until(lambda: metric(broker, "letterbox_connections_paused") == 3)
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST: the clients are gone
    assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") == 900 * 1024 + 8, timeout=10)
    assert metric(broker, "letterbox_connections_paused") == 0
    assert broker.log().count("the peer went away while it was not being read") == 3
    first.close()
    assert wait_until(lambda: metric(broker, "letterbox_publish_buffer_bytes") == 0)
