# Frame layer of the Pulsar binary protocol: turning BaseCommands (plus an
# optional message payload) into bytes and an incoming byte stream back into
# frames. Pure functions and one incremental decoder; no I/O.
#
#   simple  : [total u32][cmd_size u32][BaseCommand]
#   payload : [total u32][cmd_size u32][BaseCommand][headers_and_payload]
#   headers_and_payload :
#             ([0x0e02][u32 size][BrokerEntryMetadata])?     (broker -> client)
#             ([0x0e01][crc32c u32])?                        (checksum is optional)
#             [meta_size u32][MessageMetadata][payload]
#
# Invariants: `total` never counts its own 4 bytes; the checksum covers every
# byte after the checksum field; headers_and_payload is opaque to the decoder
# and to encode_payload_command (stored and re-sent byte for byte); a decoder
# that raised a framing error stays poisoned. With the compiled codec, SEND frames
# are read by _send_codec (send_scan.py is its reference): one at a time in _next,
# or a whole run by take_sends, which stops at any frame it does not read so that
# every error is still raised here.
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.ack_decoder import AckFields, decode_ack
from letterbox.protocol.send_decoder import SendCommand, decode_send_command
from letterbox.protocol.speedups import crc32c, send_codec

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
FRAME_PADDING = 10 * 1024

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_HEADER = struct.Struct(">II")
_MAGIC_CRC_BYTES = _U16.pack(MAGIC_CRC32C)
_SEND = pb.BaseCommand.SEND
_ACK = pb.BaseCommand.ACK
_SMALL_FRAME = 4096  # frames up to this size are copied out by slicing, larger ones through a view
# A SEND read by the compiled codec (protocol/send_scan.py is its reference and states the
# contract): (messages, publish_time, deliver_at_time, payload length) when surely acceptable,
# and (producer_id, sequence_id, num_messages, highest_sequence_id, command bytes,
# headers_and_payload, those facts or None) per frame.
SendFacts = tuple[int, int, int | None, int]
SendScan = tuple[int, int, int | None, int | None, bytes, bytes, SendFacts | None]
_decode_send: Callable[[bytearray, int, int, int], SendScan | None] | None
_decode_send = send_codec.decode_send if send_codec is not None else None
_split_sends: Callable[[bytearray, int, int], tuple[list[SendScan], int]] | None
_split_sends = send_codec.split_sends if send_codec is not None else None


class ProtocolError(Exception):
    """The peer violated the protocol; the connection should be dropped."""


class FrameTooLarge(ProtocolError):
    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds limit of {max_size}")
        self.size = size
        self.max_size = max_size


class MalformedFrame(ProtocolError):
    """Bytes that do not form a valid frame, command or payload header."""


class UnknownCommand(ProtocolError):
    """A well-framed command whose type number our schema does not know.

    Framing is intact, so the decoder is *not* poisoned by this error: the
    frame is consumed and the caller may reply and carry on.
    """

    def __init__(self, type_number: int) -> None:
        super().__init__(f"unknown command type {type_number}")
        self.type_number = type_number


class Frame:
    """One decoded frame. headers_and_payload is None for simple frames.

    `type` is the command's type; `send` holds a SEND's fields (every SEND frame has
    them). A SEND of the common shape is decoded without protobuf (send_decoder.py):
    its `command` is parsed from the kept bytes only when something asks for it.
    `facts` (SendFacts) are set when the compiled codec found the SEND surely
    acceptable: (messages, publish_time, deliver_at_time, payload length).
    `ack` (ack_decoder.AckFields) is set for an ACK of the common shape, decoded by the
    compiled codec; its `command` is parsed from the kept bytes only when asked for too."""

    __slots__ = ("_command", "_raw", "ack", "facts", "headers_and_payload", "send", "type")

    def __init__(self, command: pb.BaseCommand | None, headers_and_payload: bytes | None = None,
                 *, send: SendCommand | None = None, raw: bytes = b"",
                 facts: SendFacts | None = None, ack: AckFields | None = None) -> None:
        self._command = command
        self.ack = ack
        self._raw = raw
        self.headers_and_payload = headers_and_payload
        self.facts = facts
        self.type: pb.BaseCommand.Type.ValueType
        if command is not None:
            self.type = command.type
            self.send = SendCommand.from_pb(command.send) if self.type == _SEND else None
        else:  # a SEND (or an ACK) decoded without protobuf: `raw` holds its BaseCommand bytes
            self.type = pb.BaseCommand.SEND if ack is None else _ACK
            self.send = send

    @property
    def command(self) -> pb.BaseCommand:
        cmd = self._command
        if cmd is None:
            cmd = self._command = _parse_command(self._raw)
        return cmd

    def __repr__(self) -> str:
        name = pb.BaseCommand.Type.Name(self.type)
        extra = "" if self.headers_and_payload is None else f", {len(self.headers_and_payload)}B"
        return f"Frame({name}{extra})"


@dataclass(frozen=True, slots=True)
class ParsedPayload:
    metadata: pb.MessageMetadata
    metadata_bytes: bytes
    payload: bytes
    checksum_ok: bool
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None


# ---------------------------------------------------------------- encoding


def encode_command(cmd: pb.BaseCommand) -> bytes:
    body = cmd.SerializeToString()
    n = len(body)
    return _HEADER.pack(n + 4, n) + body


def encode_payload_command(cmd: pb.BaseCommand, headers_and_payload: bytes) -> bytes:
    body = cmd.SerializeToString()
    n = len(body)
    return b"".join((_HEADER.pack(n + 4 + len(headers_and_payload), n), body, headers_and_payload))


def build_headers_and_payload(metadata: pb.MessageMetadata | bytes, payload: bytes) -> bytes:
    """[magic][crc32c][meta_size][metadata][payload], checksum computed here."""
    meta = metadata if isinstance(metadata, bytes) else metadata.SerializeToString()
    checked = b"".join((_U32.pack(len(meta)), meta, payload))
    return b"".join((_MAGIC_CRC_BYTES, _U32.pack(crc32c(checked)), checked))


# ---------------------------------------------------------------- payload parsing


def parse_headers_and_payload(buf: bytes | memoryview) -> ParsedPayload:
    view = memoryview(buf)
    n = len(view)
    pos = 0
    broker_meta: pb.BrokerEntryMetadata | None = None
    if n >= 2 and _U16.unpack_from(view, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if n < 6:
            raise MalformedFrame("truncated broker entry metadata header")
        size = _U32.unpack_from(view, 2)[0]
        if 6 + size > n:
            raise MalformedFrame("truncated broker entry metadata")
        broker_meta = pb.BrokerEntryMetadata()
        try:
            broker_meta.ParseFromString(bytes(view[6 : 6 + size]))
        except DecodeError as exc:
            raise MalformedFrame(f"cannot parse BrokerEntryMetadata: {exc}") from exc
        pos = 6 + size
    metadata, start, end, checksum_ok = _checksum_and_metadata(buf, view, pos)
    meta_bytes = bytes(view[start:end])
    return ParsedPayload(
        metadata=metadata,
        metadata_bytes=meta_bytes,
        payload=bytes(view[end:]),
        checksum_ok=checksum_ok,
        broker_entry_metadata=broker_meta,
    )


def parse_send_payload(buf: bytes) -> tuple[pb.MessageMetadata, memoryview, bool]:
    """A SEND's headers_and_payload as parse_headers_and_payload reads it, without
    copies: (metadata, payload as a view of `buf`, checksum_ok). The metadata is
    parsed from a view too; `buf` (the frame's bytes, stored as they came) is
    immutable, so the view stays valid. A SEND carrying broker entry metadata
    takes the general path."""
    n = len(buf)
    if n >= 2 and _U16.unpack_from(buf, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        parsed = parse_headers_and_payload(buf)
        return parsed.metadata, memoryview(parsed.payload), parsed.checksum_ok
    view = memoryview(buf)
    metadata, _, end, checksum_ok = _checksum_and_metadata(buf, view, 0)
    return metadata, view[end:], checksum_ok


def _checksum_and_metadata(buf: bytes | memoryview, view: memoryview,
                           pos: int) -> tuple[pb.MessageMetadata, int, int, bool]:
    """From `pos` on: the optional CRC32C header (verified over the rest), the metadata
    size and the MessageMetadata, parsed from a view of `buf`: (metadata, its start,
    its end = the payload's start, checksum_ok)."""
    n = len(view)
    checksum_ok = True
    if n - pos >= 2 and _U16.unpack_from(buf, pos)[0] == MAGIC_CRC32C:
        if n - pos < 6:
            raise MalformedFrame("truncated checksum")
        expected = _U32.unpack_from(buf, pos + 2)[0]
        pos += 6
        checksum_ok = crc32c(view[pos:]) == expected
    if n - pos < 4:
        raise MalformedFrame("truncated metadata size")
    meta_size = _U32.unpack_from(buf, pos)[0]
    pos += 4
    if meta_size > n - pos:
        raise MalformedFrame(f"metadata size {meta_size} exceeds remaining {n - pos} bytes")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(view[pos : pos + meta_size])  # type: ignore[arg-type]  # upb reads buffers
    except DecodeError as exc:
        raise MalformedFrame(f"cannot parse MessageMetadata: {exc}") from exc
    return metadata, pos, pos + meta_size, checksum_ok


def parse_entry_metadata(buf: bytes | memoryview) -> pb.MessageMetadata:
    """Only the MessageMetadata of a stored entry, without verifying the
    checksum (the entry was verified when it was published)."""
    return _entry_metadata(buf)[0]


def parse_entry(buf: bytes | memoryview) -> tuple[pb.MessageMetadata, bytes]:
    """A stored entry's MessageMetadata and payload (as stored: compressed or batched as it
    is), without verifying the checksum: one parse where a reader needs both."""
    metadata, end = _entry_metadata(buf)
    return metadata, bytes(memoryview(buf)[end:])


def _entry_metadata(buf: bytes | memoryview) -> tuple[pb.MessageMetadata, int]:
    """The MessageMetadata of a stored entry and where its payload starts."""
    view = memoryview(buf)
    n = len(view)
    pos = 0
    if n >= 6 and _U16.unpack_from(view, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        pos = 6 + _U32.unpack_from(view, 2)[0]
    if n - pos >= 2 and _U16.unpack_from(view, pos)[0] == MAGIC_CRC32C:
        pos += 6
    if n - pos < 4:
        raise MalformedFrame("truncated metadata size")
    size = _U32.unpack_from(view, pos)[0]
    if size > n - pos - 4:
        raise MalformedFrame(f"metadata size {size} exceeds remaining {n - pos - 4} bytes")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(bytes(view[pos + 4 : pos + 4 + size]))
    except DecodeError as exc:
        raise MalformedFrame(f"cannot parse MessageMetadata: {exc}") from exc
    return metadata, pos + 4 + size


# ---------------------------------------------------------------- decoding


def _parse_command(data: bytes) -> pb.BaseCommand:
    cmd = pb.BaseCommand()
    try:
        cmd.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedFrame(f"cannot parse BaseCommand: {exc}") from exc
    if not cmd.HasField("type"):
        # proto2 stores an unknown enum value as an unknown field.
        unknown = UnknownFieldSet(cmd)
        for i in range(len(unknown)):
            field = unknown[i]
            if field.field_number == 1 and isinstance(field.data, int):
                raise UnknownCommand(field.data)
        raise MalformedFrame("BaseCommand without a type")
    return cmd


class FrameDecoder:
    """Incremental decoder: feed() bytes as they arrive, then call next_frame()
    until it returns None. Uses one bytearray and a read offset; consumed bytes
    are dropped lazily so each byte is copied O(1) times on average."""

    __slots__ = ("_buf", "_error", "_max", "_pos")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max = max_frame_size
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        if pos:
            if pos == len(buf):
                buf.clear()
                self._pos = 0
            elif pos > 65536 and pos * 2 > len(buf):
                del buf[:pos]
                self._pos = 0
        buf += data

    def next_frame(self) -> Frame | None:
        if self._error is not None:
            raise self._error
        try:
            return self._next()
        except UnknownCommand:
            raise
        except ProtocolError as exc:
            self._error = exc
            raise

    def take_sends(self) -> list[SendScan]:
        """The run of complete SEND frames of the common shape at the front of the buffer, as
        the compiled codec reads them (send_scan.split_sends); [] without the codec, after an
        error, or when the next frame is anything else (next_frame reads that one)."""
        if _split_sends is None or self._error is not None:
            return []
        sends, self._pos = _split_sends(self._buf, self._pos, self._max)
        return sends

    def release(self) -> None:
        """Give back every byte buffered (the connection is gone); later calls raise."""
        self._buf = bytearray()
        self._pos = 0
        if self._error is None:
            self._error = ProtocolError("connection is closed")

    def _next(self) -> Frame | None:
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        if avail < 4:
            if avail == 0 and pos:  # all read: a large frame's bytes go back now, not at the next feed
                buf.clear()
                self._pos = 0
            return None
        total = _U32.unpack_from(buf, pos)[0]
        if total > self._max:
            raise FrameTooLarge(total, self._max)
        if total < 4:
            raise MalformedFrame(f"frame size {total} too small")
        if avail < 4 + total:
            return None
        cmd_size = _U32.unpack_from(buf, pos + 4)[0]
        if cmd_size > total - 4:
            raise MalformedFrame(f"command size {cmd_size} exceeds frame size {total}")
        start = pos + 8
        end = pos + 4 + total
        cmd_end = start + cmd_size
        self._pos = end  # consume first: an UnknownCommand leaves framing intact
        if _decode_send is not None and cmd_size > 3 and buf[start] == 0x08 and buf[start + 1] == _SEND:
            got = _decode_send(buf, start, cmd_end, end)
            if got is not None:
                pid, seq, num, highest, cmd, hp, facts = got
                return Frame(None, hp, send=SendCommand(pid, seq, num, highest), raw=cmd, facts=facts)
        if total <= _SMALL_FRAME:  # a slice then bytes(): two copies of a few bytes, fewer objects
            raw = bytes(buf[start:cmd_end])
            rest = bytes(buf[cmd_end:end]) if cmd_end < end else None
        else:  # one copy each; the views are released before `buf` can grow again
            with memoryview(buf) as view:
                raw = view[start:cmd_end].tobytes()
                rest = view[cmd_end:end].tobytes() if cmd_end < end else None
        if cmd_size > 3 and raw[0] == 0x08 and raw[1] == _SEND:
            send = decode_send_command(raw)
            if send is not None:
                return Frame(None, rest, send=send, raw=raw)
        elif decode_ack is not None and cmd_size > 3 and raw[1] == _ACK and raw[0] == 0x08:
            ack = decode_ack(raw)
            if ack is not None:
                return Frame(None, rest, raw=raw, ack=ack)
        return Frame(_parse_command(raw), rest)
