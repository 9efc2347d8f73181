"""ServerProtocol handshake state machine."""
from __future__ import annotations

import struct

import pytest

from letterbox.protocol import (
    ProtocolError,
    ServerProtocol,
    State,
    UnknownCommand,
    client_commands,
    commands,
    pb,
)


def _unknown_frame(type_number: int) -> bytes:
    body = b"\x08" + bytes([type_number])
    return struct.pack(">II", len(body) + 4, len(body)) + body


def test_connect_then_commands() -> None:
    conn = ServerProtocol()
    assert conn.state.value == "awaiting_connect"
    conn.receive_data(client_commands.connect("c", 21) + commands.ping()[:3])
    frame = conn.next_event()
    assert frame is not None and frame.command.type == pb.BaseCommand.CONNECT
    assert conn.state is State.CONNECTED and conn.connected
    assert conn.next_event() is None
    conn.receive_data(commands.ping()[3:])
    frame = conn.next_event()
    assert frame is not None and frame.command.type == pb.BaseCommand.PING


def test_command_before_connect() -> None:
    conn = ServerProtocol()
    conn.receive_data(commands.ping())
    with pytest.raises(ProtocolError):
        conn.next_event()
    assert conn.state is State.CLOSED
    with pytest.raises(ProtocolError):
        conn.receive_data(b"")


def test_connect_twice() -> None:
    conn = ServerProtocol()
    conn.receive_data(client_commands.connect("c", 21) * 2)
    assert conn.next_event() is not None
    with pytest.raises(ProtocolError):
        conn.next_event()
    assert conn.state is State.CLOSED


def test_frame_error_closes() -> None:
    conn = ServerProtocol(max_frame_size=100)
    conn.receive_data(struct.pack(">I", 101))
    with pytest.raises(ProtocolError):
        conn.next_event()
    assert conn.state is State.CLOSED


def test_unknown_command_after_connect_is_recoverable() -> None:
    conn = ServerProtocol()
    conn.receive_data(client_commands.connect("c", 21) + _unknown_frame(120) + commands.ping())
    assert conn.next_event() is not None
    with pytest.raises(UnknownCommand):
        conn.next_event()
    assert conn.state is State.CONNECTED
    frame = conn.next_event()
    assert frame is not None and frame.command.type == pb.BaseCommand.PING


def test_unknown_command_before_connect_closes() -> None:
    conn = ServerProtocol()
    conn.receive_data(_unknown_frame(120))
    with pytest.raises(UnknownCommand):
        conn.next_event()
    assert conn.state is State.CLOSED


def test_close() -> None:
    conn = ServerProtocol()
    conn.close()
    with pytest.raises(ProtocolError):
        conn.next_event()
