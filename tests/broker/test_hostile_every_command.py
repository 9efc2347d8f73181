"""Bytes that are not UTF-8 in every string field of every command a client can send (walked
from the protocol schema, one level of nested messages deep: properties, metadata, schema,
key-value lists), CONNECT and SEND aside (test_hostile_string_fuzz.py has them: CONNECT is
refused and closed, a SEND's metadata is stored byte-exact). Each command is sent after the
handshake with its required fields filled; the broker answers with an error naming the field
(every request it serves does) or goes on without one (a command a broker sends, or one it
ignores), never with a traceback; the connection still
answers a PING, and other clients are unaffected."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from letterbox.protocol import encode_command, pb
from tests.broker.hostile_wire import INVALID_UTF8, marker, poisoned
from tests.broker.test_robustness import (  # noqa: F401 (fixtures)
    ConnectionClosed,
    RawConn,
    others_unaffected,
    survivor,
)
from tests.conftest import BrokerProcess

T = pb.BaseCommand
SKIP = {"connect", "send"}  # their own fuzz: test_hostile_string_fuzz.py
# requests letterbox answers (the others: commands a broker sends, or that it ignores)
REQUESTS = {"subscribe", "producer", "lookupTopic", "partitionMetadata", "getTopicsOfNamespace", "getSchema",
            "getOrCreateSchema"}
_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def _string_paths(desc: Descriptor, depth: int = 1) -> list[str]:
    out: list[str] = []
    for f in desc.fields:
        if f.type == _STRING:
            out.append(f.name)
        elif f.type == _MESSAGE and depth > 0:
            out += [f"{f.name}.{p}" for p in _string_paths(f.message_type, depth - 1)]
    return out


def _cases() -> list[tuple[str, str]]:
    cases = []
    for f in T.DESCRIPTOR.fields:
        if f.type == _MESSAGE and f.name not in SKIP:
            cases += [(f.name, path) for path in _string_paths(f.message_type)]
    return cases


def _fill_required(message: Any) -> None:
    """Give every required field a value (so the command parses), nested messages too."""
    for f in message.DESCRIPTOR.fields:
        if not f.is_required:
            continue
        if f.type == _MESSAGE:
            _fill_required(getattr(message, f.name))
        elif f.type == _STRING:
            setattr(message, f.name, "persistent://public/default/x" if f.name == "topic" else "x")
        elif f.type == FieldDescriptor.TYPE_BYTES:
            setattr(message, f.name, b"")
        elif f.type == FieldDescriptor.TYPE_ENUM:
            setattr(message, f.name, f.enum_type.values[0].number)
        elif f.type == FieldDescriptor.TYPE_BOOL:
            setattr(message, f.name, False)
        else:
            setattr(message, f.name, 1)


def _put(message: Any, path: str, text: str) -> None:
    name, _, rest = path.partition(".")
    f = message.DESCRIPTOR.fields_by_name[name]
    if rest:
        inner = getattr(message, name).add() if f.is_repeated else getattr(message, name)
        _fill_required(inner)
        _put(inner, rest, text)
    elif f.is_repeated:
        getattr(message, name).append(text)
    else:
        setattr(message, name, text)


def _frame(command: str, path: str) -> bytes:
    cmd = T(type=T.DESCRIPTOR.fields_by_name[command].number)  # a command's field number is its type
    body = getattr(cmd, command)
    _fill_required(body)
    _put(body, path, marker(INVALID_UTF8))
    return poisoned(encode_command(cmd), INVALID_UTF8)


def _ids() -> list[str]:
    return [f"{c}.{p}" for c, p in _cases()]


@pytest.fixture
def raw(broker: BrokerProcess, others_unaffected: None) -> Iterator[RawConn]:  # noqa: F811
    conn = RawConn(broker.port)
    conn.handshake()
    yield conn
    conn.close()
    log = broker.log()
    assert "Traceback" not in log and "internal error" not in log, log[-5000:]
    assert "not JSON serializable" not in log, log[-5000:]


def _until_pong(raw: RawConn) -> list[Any]:
    """Send a PING; the frames answered before its PONG (answers come in order)."""
    raw.send(encode_command(T(type=T.PING, ping=pb.CommandPing())))
    frames = []
    raw.sock.settimeout(30)
    while True:
        frame = raw.decoder.next_frame()
        if frame is None:
            data = raw.sock.recv(65536)
            if not data:
                raise ConnectionClosed()
            raw.decoder.feed(data)
        elif frame.type == T.PONG:
            return frames
        else:
            frames.append(frame)


@pytest.mark.parametrize(("command", "path"), _cases(), ids=_ids())
def test_a_string_field_that_is_not_utf8(raw: RawConn, command: str, path: str) -> None:
    assert {c for c, _ in _cases()} >= REQUESTS
    raw.send(_frame(command, path))
    frames = _until_pong(raw)
    for frame in frames:  # any answer is the refusal naming the field (ERROR or the command's own error)
        text = str(frame.command)
        assert "is not valid UTF-8" in text and path.split(".")[-1] in text, text
    if command in REQUESTS:
        assert frames, f"{command} with {path} not UTF-8 got no answer"
