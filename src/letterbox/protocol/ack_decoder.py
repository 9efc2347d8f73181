# The ACK every consumer sends for what it processed, read without protobuf objects: the
# common CommandAck shape, decoded into the plain values handle_ack needs. decode_ack is the
# compiled letterbox.protocol._consumer_codec.decode_ack when it is built (speedups.py), else
# None: decode_ack_py below is its reference (tests/protocol/test_consumer_codec_ack.py compares
# the two on the official client's bytes and on mutated ones, and both with protobuf), but upb
# parses faster than this pure-Python loop (0.39 against 1.46 us per acked id), so without the
# extension frames take the protobuf path as before.
#
# Invariants:
#   * the decoder returns exactly what protobuf (upb) parses from the same bytes for the values
#     it returns, or None -- never a guess, never an exception for bad bytes;
#   * None means "take the protobuf path": any field, wire type, duplicate scalar, enum value,
#     varint or length outside the common shape below, so malformed bytes reach protobuf, which
#     raises as before;
#   * the common shape: BaseCommand = [type = ACK][ack = CommandAck] and nothing else;
#     CommandAck holding consumer_id, ack_type (Individual or Cumulative), message ids all of
#     one ledger and request_id, each scalar at most once and the first two present; each
#     MessageIdData holding ledgerId and entryId, optionally partition, batch_index,
#     batch_size (each at most once, read but not returned) and unpacked ack_set words.
from __future__ import annotations

from collections.abc import Callable

from letterbox.protocol import speedups

__all__ = ["AckFields", "decode_ack", "decode_ack_py"]

# (consumer id, ack type: 0 Individual / 1 Cumulative, request id or None, the ids' ledger or
#  None when there are none, entry ids without an ack set, (entry id, ack set words) in order)
AckFields = tuple[int, int, "int | None", "int | None", list[int], list[tuple[int, list[int]]]]

_ACK_HEAD = b"\x08\x0a\x52"  # BaseCommand: type (field 1) = ACK (10), ack (field 10, length-delimited)
_I64_SIGN = 1 << 63
_U64 = 1 << 64
# CommandAck scalars: tag -> index into `fields` (consumer_id, ack_type, request_id)
_ACK_FIELDS = {0x08: 0, 0x10: 1, 0x40: 2}
# MessageIdData: tag -> index into `fields` (ledgerId, entryId, partition, batch_index, batch_size)
_ID_FIELDS = {0x08: 0, 0x10: 1, 0x18: 2, 0x20: 3, 0x30: 4}


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of a varint of at most ten bytes (the tenth at most 1) that ends
    before `end`; value -1 otherwise."""
    result = 0
    for i in range(10):
        if pos >= end:
            return -1, pos
        b = buf[pos]
        pos += 1
        if i == 9 and b > 1:
            return -1, pos
        result |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return result, pos
    return -1, pos


def _decode_id(raw: bytes, pos: int, end: int) -> tuple[int, int, list[int] | None] | None:
    """(ledger, entry, ack set words or None) of one MessageIdData in raw[pos:end], or None."""
    fields: list[int | None] = [None] * 5
    words: list[int] | None = None
    while pos < end:
        tag = raw[pos]
        value, pos = _varint(raw, pos + 1, end)
        if value < 0:
            return None
        if tag == 0x28:
            if words is None:
                words = []
            words.append(value - _U64 if value & _I64_SIGN else value)
            continue
        index = _ID_FIELDS.get(tag)
        if index is None or fields[index] is not None:
            return None
        fields[index] = value
    ledger, entry = fields[0], fields[1]
    if ledger is None or entry is None:
        return None
    return ledger, entry, words


def decode_ack_py(raw: bytes) -> AckFields | None:
    """A serialized BaseCommand of the common ACK shape, or None (use protobuf)."""
    end = len(raw)
    if end < 4 or raw[:3] != _ACK_HEAD:
        return None
    size, pos = _varint(raw, 3, end)
    if size != end - pos:
        return None
    fields: list[int | None] = [None, None, None]
    ledger: int | None = None
    plain: list[int] = []
    items: list[tuple[int, list[int]]] = []
    while pos < end:
        tag = raw[pos]
        value, pos = _varint(raw, pos + 1, end)
        if value < 0:
            return None
        if tag == 0x1A:  # message_id
            if value > end - pos:
                return None
            mid = _decode_id(raw, pos, pos + value)
            if mid is None or (ledger is not None and mid[0] != ledger):
                return None
            ledger = mid[0]
            if mid[2] is None:
                plain.append(mid[1])
            else:
                items.append((mid[1], mid[2]))
            pos += value
            continue
        index = _ACK_FIELDS.get(tag)
        if index is None or fields[index] is not None:
            return None
        fields[index] = value
    consumer_id, ack_type, request_id = fields
    if consumer_id is None or ack_type is None or ack_type > 1:
        return None
    return consumer_id, ack_type, request_id, ledger, plain, items


_c = speedups.consumer_codec
decode_ack: Callable[[bytes], AckFields | None] | None = _c.decode_ack if _c is not None else None
