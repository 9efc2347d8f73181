"""A hostile string -- bytes that are not UTF-8, a NUL, 5 MB -- in every string field of
CONNECT, SUBSCRIBE, PRODUCER and a SEND's message metadata, each over its own raw
connection. Every case gets a clear answer: a refusal naming the field (always, for
bytes that are not UTF-8, except in a message's metadata), or acceptance; a message's
metadata is stored and delivered byte-exact and its admin views answer. After each
case the broker has logged no traceback and its other clients work."""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from letterbox.protocol import (
    client_commands,
    encode_command,
    parse_headers_and_payload,
    pb,
)
from tests.admin.helpers import call_raw
from tests.broker.hostile_wire import (
    INVALID_UTF8,
    marker,
    metadata,
    metadata_bytes,
    poisoned,
    send_frame,
)
from tests.broker.test_robustness import (  # noqa: F401 (fixtures)
    ConnectionClosed,
    RawConn,
    others_unaffected,
    survivor,
)
from tests.conftest import BrokerProcess

T = pb.BaseCommand
BIG = 5_000_000  # characters: a 5 MB string still fits a default frame
HOSTILE: dict[str, bytes] = {"invalid-utf8": INVALID_UTF8, "nul": b"a\x00b", "5MB": b"x" * BIG}

# the string fields of each command, as "field" or "repeated_message.field"
CONNECT_FIELDS = ["client_version", "auth_method_name", "proxy_to_broker_url", "original_principal",
                  "original_auth_data", "original_auth_method"]
SUBSCRIBE_FIELDS = ["topic", "subscription", "consumer_name", "metadata.key", "metadata.value",
                    "subscription_properties.key", "subscription_properties.value", "schema.name",
                    "schema.properties.key", "schema.properties.value"]
PRODUCER_FIELDS = ["topic", "producer_name", "initial_subscription_name", "metadata.key", "metadata.value",
                   "schema.name"]
SEND_FIELDS = ["producer_name", "replicated_from", "partition_key", "replicate_to", "encryption_algo", "uuid",
               "properties.key", "properties.value"]


def _set(message: object, path: str, text: str) -> None:
    """Put `text` in the field `path` (a repeated message gets one element; a repeated
    string one item)."""
    name, _, rest = path.partition(".")
    if rest:
        if name == "schema":
            message.schema.type = pb.Schema.String  # type: ignore[attr-defined]
            message.schema.schema_data = b""  # type: ignore[attr-defined]
            message.schema.name = "fuzz"  # type: ignore[attr-defined]
            _set(message.schema, rest, text)  # type: ignore[attr-defined]
            return
        item = getattr(message, name).add()
        for other in ("key", "value"):
            setattr(item, other, "v")
        setattr(item, rest, text)
        return
    field = getattr(message, name)
    if isinstance(field, str) or not hasattr(field, "append"):
        setattr(message, name, text)
    else:
        field.append(text)


def _with(frame_of: object, path: str, hostile: bytes) -> bytes:
    """The frame with `hostile` in field `path`: text set directly, other bytes through a marker."""
    try:
        text = hostile.decode()
    except UnicodeDecodeError:
        return poisoned(frame_of(path, marker(hostile)), hostile)  # type: ignore[operator]
    return frame_of(path, text)  # type: ignore[operator, no-any-return]


def _topic() -> str:
    return f"persistent://public/default/fuzz-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def raw(broker: BrokerProcess, others_unaffected: None) -> Iterator[RawConn]:  # noqa: F811
    conn = RawConn(broker.port)
    yield conn
    conn.close()
    log = broker.log()
    assert "Traceback" not in log and "internal error" not in log, log[-5000:]


def _answer(raw: RawConn) -> pb.BaseCommand | None:
    """The broker's answer, or None when it closed the connection."""
    try:
        return raw.read_frame(timeout=30).command
    except ConnectionClosed:
        return None


def _check_refusal(cmd: pb.BaseCommand | None, path: str, hostile: bytes, ok: int) -> None:
    assert cmd is not None, "the connection was closed without an answer"
    assert cmd.type in (ok, T.ERROR), cmd
    if hostile == INVALID_UTF8:
        assert cmd.type == T.ERROR, f"{path} with bytes that are not UTF-8 was accepted"
        assert f"{path.split('.')[0]}" in cmd.error.message and "is not valid UTF-8" in cmd.error.message
    elif cmd.type == T.ERROR:
        assert cmd.error.message and len(cmd.error.message) < 2000, "a refusal says why, briefly"


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("path", CONNECT_FIELDS)
def test_connect(raw: RawConn, path: str, hostile: str) -> None:
    def frame(p: str, text: str) -> bytes:
        body = pb.CommandConnect(client_version="fuzz", protocol_version=21)
        _set(body, p, text)
        return encode_command(T(type=T.CONNECT, connect=body))

    raw.send(_with(frame, path, HOSTILE[hostile]))
    cmd = _answer(raw)
    if HOSTILE[hostile] == INVALID_UTF8:
        assert cmd is not None and cmd.type == T.ERROR, cmd
        assert f"{path} is not valid UTF-8" in cmd.error.message
        assert _answer(raw) is None  # and the connection is closed
    else:
        assert cmd is not None and cmd.type == T.CONNECTED, cmd
        raw.ping_pong()


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("path", SUBSCRIBE_FIELDS)
def test_subscribe(raw: RawConn, path: str, hostile: str) -> None:
    topic = _topic()

    def frame(p: str, text: str) -> bytes:
        body = pb.CommandSubscribe(topic=topic, subscription="s", consumer_id=1, request_id=5,
                                   subType=pb.CommandSubscribe.Shared)
        _set(body, p, text)
        return encode_command(T(type=T.SUBSCRIBE, subscribe=body))

    raw.handshake()
    raw.send(_with(frame, path, HOSTILE[hostile]))
    _check_refusal(_answer(raw), path, HOSTILE[hostile], T.SUCCESS)
    raw.ping_pong()


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("path", PRODUCER_FIELDS)
def test_producer(raw: RawConn, path: str, hostile: str) -> None:
    topic = _topic()

    def frame(p: str, text: str) -> bytes:
        body = pb.CommandProducer(topic=topic, producer_id=1, request_id=5)
        _set(body, p, text)
        if p == "producer_name":
            body.user_provided_producer_name = True
        return encode_command(T(type=T.PRODUCER, producer=body))

    raw.handshake()
    raw.send(_with(frame, path, HOSTILE[hostile]))
    _check_refusal(_answer(raw), path, HOSTILE[hostile], T.PRODUCER_SUCCESS)
    raw.ping_pong()


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("path", SEND_FIELDS)
def test_send_metadata(broker: BrokerProcess, raw: RawConn, path: str, hostile: str) -> None:
    topic = _topic()
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(client_commands.subscribe(topic, "s", 2, 2, pb.CommandSubscribe.Shared))
    raw.expect(T.SUCCESS)
    value = HOSTILE[hostile]
    meta = metadata("p" if path != "producer_name" else "", 0)
    try:
        _set(meta, path, value.decode())
        poison: bytes | None = None
    except UnicodeDecodeError:
        _set(meta, path, marker(value))
        poison = value
    if path == "encryption_algo":
        meta.ClearField("encryption_algo")  # an encrypted message needs keys; the algo alone is metadata
        _set(meta, path, marker(value) if poison else value.decode())
    sent_meta = metadata_bytes(meta, poison)
    raw.send(send_frame(1, 0, b"payload", sent_meta))
    cmd = _answer(raw)
    assert cmd is not None and cmd.type in (T.SEND_RECEIPT, T.SEND_ERROR), cmd
    if cmd.type == T.SEND_ERROR:
        assert cmd.send_error.message
        return
    raw.send(client_commands.flow(2, 10))
    delivered = raw.expect(T.MESSAGE, timeout=30)
    assert delivered.headers_and_payload is not None
    stored = parse_headers_and_payload(delivered.headers_and_payload)
    assert stored.metadata_bytes == sent_meta, "the metadata is delivered byte-exact"
    assert stored.payload == b"payload"
    base = "/admin/v2/persistent/" + topic.removeprefix("persistent://")
    status, _, _ = call_raw(broker.admin_url, "GET", base + "/examinemessage?initialPosition=earliest"
                            "&messagePosition=1")
    assert status == 200
