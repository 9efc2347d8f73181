# Hand-written decoder for the command every unbatched message carries into the broker:
# a SEND's BaseCommand, read without building protobuf objects (measured against upb on
# the official client's bytes: 0.67 us for decoding and reading the fields vs 0.94 us for
# FromString plus the field reads and HasField calls the handler needs).
#
# Invariants:
#   * the decoder either returns exactly what protobuf (upb) parses from the same bytes
#     for the fields it returns (last value of a repeated scalar wins, absent fields are
#     None, no required-field check, as upb does), or None -- never a guess;
#   * None means "take the protobuf path": any field, wire type, encoding or length
#     outside the common shape below. Malformed bytes therefore always reach protobuf,
#     which raises as before; the decoder never raises;
#   * the common shape: BaseCommand = [type = SEND][send = CommandSend] and nothing else;
#     CommandSend holding only producer_id, sequence_id, num_messages (0..2^31-1) and
#     highest_sequence_id -- no transaction, chunk, marker or message id fields.
from __future__ import annotations

from letterbox.protocol import pulsar_api_pb2 as pb

__all__ = ["SendCommand", "decode_send_command"]

_U64 = 1 << 64
_I32_MAX = (1 << 31) - 1
# BaseCommand: type (field 1, varint) = SEND (0x08 0x06), then send (field 6,
# length-delimited: 0x32)
_SEND = pb.BaseCommand.SEND


class SendCommand:
    """The fields of a CommandSend the broker reads. num_messages and
    highest_sequence_id are None when the SEND does not carry them."""

    __slots__ = ("highest_sequence_id", "num_messages", "producer_id", "sequence_id")

    def __init__(self, producer_id: int, sequence_id: int, num_messages: int | None = None,
                 highest_sequence_id: int | None = None) -> None:
        self.producer_id = producer_id
        self.sequence_id = sequence_id
        self.num_messages = num_messages
        self.highest_sequence_id = highest_sequence_id

    @classmethod
    def from_pb(cls, c: pb.CommandSend) -> SendCommand:
        return cls(
            c.producer_id,
            c.sequence_id,
            c.num_messages if c.HasField("num_messages") else None,
            c.highest_sequence_id if c.HasField("highest_sequence_id") else None,
        )

    def __repr__(self) -> str:
        return (f"SendCommand(producer_id={self.producer_id}, sequence_id={self.sequence_id}, "
                f"num_messages={self.num_messages}, highest_sequence_id={self.highest_sequence_id})")


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position); value -1 when the varint is cut off by `end` or longer
    than ten bytes. Values are not truncated: callers check their range."""
    if pos >= end:
        return -1, pos
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while pos < end and shift < 70:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    return -1, pos


def decode_send_command(data: bytes) -> SendCommand | None:
    """A serialized BaseCommand of the common SEND shape, or None (use protobuf)."""
    end = len(data)
    if end < 5 or data[2] != 0x32 or data[1] != _SEND or data[0] != 0x08:
        return None
    size = data[3]
    pos = 4
    if size >= 0x80:
        size, pos = _varint(data, 3, end)
    if pos + size != end:  # (also a cut-off size: -1)
        return None
    producer_id = sequence_id = 0
    num_messages: int | None = None
    highest: int | None = None
    while pos < end:
        tag = data[pos]
        if pos + 1 >= end:
            return None
        value = data[pos + 1]
        pos += 2
        if value >= 0x80:  # a multi-byte varint
            value, pos = _varint(data, pos - 1, end)
            if value < 0 or value >= _U64:
                return None
        if tag == 0x08:
            producer_id = value
        elif tag == 0x10:
            sequence_id = value
        elif tag == 0x18:
            if value > _I32_MAX:  # a negative int32: let protobuf read it
                return None
            num_messages = value
        elif tag == 0x30:
            highest = value
        else:
            return None
    return SendCommand(producer_id, sequence_id, num_messages, highest)
