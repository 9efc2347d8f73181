# SEND_RECEIPT, the one command the broker writes for every durable SEND, encoded
# field by field: protobuf's own bytes for the same command (a test compares them),
# without building the three protobuf objects (BaseCommand, CommandSendReceipt,
# MessageIdData) per receipt.
#
# Invariants: every id is an unsigned 64-bit value (a varint of at most 10 bytes);
# fields are written in field-number order, as protobuf serializes them.
from __future__ import annotations

import struct

from letterbox.protocol import pulsar_api_pb2 as pb

__all__ = ["send_receipt"]

_HEADER = struct.Struct(">II")
_BYTE = [bytes((i,)) for i in range(0x80)]
# BaseCommand: type (field 1) = SEND_RECEIPT, then send_receipt (field 7, length-delimited)
_RECEIPT_TYPE = bytes((0x08, pb.BaseCommand.SEND_RECEIPT, 0x3A))


def _varint(value: int) -> bytes:
    """Protobuf base-128 varint of an unsigned 64-bit value."""
    if value < 0x80:
        return _BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    highest_sequence_id: int | None = None,
) -> bytes:
    """The framed SEND_RECEIPT (message id: ledger_id, entry_id)."""
    msg_id = b"".join((b"\x08", _varint(ledger_id), b"\x10", _varint(entry_id)))
    parts = [b"\x08", _varint(producer_id), b"\x10", _varint(sequence_id), b"\x1a", _varint(len(msg_id)), msg_id]
    if highest_sequence_id is not None:
        parts += (b"\x20", _varint(highest_sequence_id))
    receipt = b"".join(parts)
    body = b"".join((_RECEIPT_TYPE, _varint(len(receipt)), receipt))
    n = len(body)
    return _HEADER.pack(n + 4, n) + body
