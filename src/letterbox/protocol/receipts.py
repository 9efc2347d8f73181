# The frames the broker writes once per message, encoded field by field: SEND_RECEIPT
# (every durable SEND) and MESSAGE (every dispatch). The bytes are protobuf's own for
# the same command (tests compare them over many values), without building the
# BaseCommand / CommandSendReceipt / CommandMessage / MessageIdData objects per frame.
#
# Invariants: ids are unsigned 64-bit values, int32/int64 fields are written as
# protobuf writes negative numbers (ten-byte two's complement varints); fields are
# written in field-number order, as protobuf serializes them; repeated int64 fields
# (ack_set) are not packed (proto2 default).
#
# The hot path asks `message_encoder()` for a consumer's MESSAGE encoder and calls
# `encode_pending_receipts`: over the compiled letterbox.protocol._consumer_codec functions when
# built (speedups.py), else MessageEncoder / the pure-Python reference here (message,
# message_frames, pending_receipts are the references, with the same contracts)
# (tests/protocol/test_consumer_codec.py compares them byte for byte).
from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol import speedups

__all__ = ["FrameEncoder", "MessageEncoder", "encode_pending_receipts", "message", "message_encoder",
           "message_frames", "pending_receipts", "send_receipt", "send_receipts", "varint"]

_HEADER = struct.Struct(">II")
_BYTE = [bytes((i,)) for i in range(0x80)]
_U64 = (1 << 64) - 1
# BaseCommand: type (field 1) = SEND_RECEIPT, then send_receipt (field 7, length-delimited)
_RECEIPT_TYPE = bytes((0x08, pb.BaseCommand.SEND_RECEIPT, 0x3A))
# BaseCommand: type (field 1) = MESSAGE, then message (field 9, length-delimited)
_MESSAGE_TYPE = bytes((0x08, pb.BaseCommand.MESSAGE, 0x4A))


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of an unsigned 64-bit value (a negative int32/int64
    is given as value & (2**64 - 1), as protobuf writes it)."""
    if value < 0x80:
        return _BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
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
    msg_id = b"".join((b"\x08", varint(ledger_id), b"\x10", varint(entry_id)))
    tail = b"" if highest_sequence_id is None else b"\x20" + varint(highest_sequence_id)
    receipt = b"".join(
        (b"\x08", varint(producer_id), b"\x10", varint(sequence_id), b"\x1a", _BYTE[len(msg_id)], msg_id, tail)
    )
    body = b"".join((_RECEIPT_TYPE, varint(len(receipt)), receipt))
    n = len(body)
    return _HEADER.pack(n + 4, n) + body


def send_receipts(producer_id: int, ledger_id: int,
                  receipts: Iterable[tuple[int, int, int | None]]) -> bytes:
    """The framed SEND_RECEIPTs of one producer's entries in one ledger, back to back:
    (sequence_id, entry_id, highest_sequence_id or None) each; the bytes of
    send_receipt(producer_id, sequence_id, ledger_id, entry_id, highest) for every one,
    with the parts they share encoded once."""
    head = b"\x08" + varint(producer_id) + b"\x10"
    ledger = b"\x08" + varint(ledger_id) + b"\x10"
    frame_header = _HEADER.pack
    out: list[bytes] = []
    append = out.append
    for seq, entry_id, highest in receipts:
        msg_id = ledger + varint(entry_id)
        receipt = b"".join((head, varint(seq), b"\x1a", _BYTE[len(msg_id)], msg_id))
        if highest is not None:
            receipt += b"\x20" + varint(highest)
        size = len(receipt)
        n = size + 4 if size < 0x80 else size + 3 + len(varint(size))
        append(frame_header(n + 4, n))
        append(_RECEIPT_TYPE)
        append(_BYTE[size] if size < 0x80 else varint(size))
        append(receipt)
    return b"".join(out)


def pending_receipts(producer_id: int, ledger_id: int,
                     pending: Sequence[tuple[int, int, int | None, int]]) -> bytes:
    """send_receipts() of a producer's pass as the broker keeps it: (entry id, sequence id,
    highest sequence id or None, bytes held) per SEND, in order."""
    return send_receipts(producer_id, ledger_id, [(seq, eid, highest) for eid, seq, highest, _n in pending])


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: Sequence[int] | None,
    headers_and_payload: bytes,
    *,
    batch_index: int | None = None,
    consumer_epoch: int | None = None,
) -> bytes:
    """A MESSAGE frame for one stored entry (headers_and_payload as stored).
    partition -1 and redelivery_count 0 are left off the wire, as Pulsar does."""
    mid = b"".join((b"\x08", varint(ledger_id), b"\x10", varint(entry_id)))
    if partition >= 0:
        mid += b"\x18" + varint(partition)
    if batch_index is not None:
        mid += b"\x20" + varint(batch_index & _U64)
    parts = [b"\x08", varint(consumer_id), b"\x12", varint(len(mid)), mid]
    if redelivery_count:
        parts += (b"\x18", varint(redelivery_count))
    if ack_set:
        for word in ack_set:
            parts += (b"\x20", varint(word & _U64))
    if consumer_epoch is not None:
        parts += (b"\x28", varint(consumer_epoch))
    body = b"".join(parts)
    cmd = b"".join((_MESSAGE_TYPE, varint(len(body)), body))
    n = len(cmd)
    return b"".join((_HEADER.pack(n + 4 + len(headers_and_payload), n), cmd, headers_and_payload))


def message_frames(consumer_id: int, ledger_id: int, partition: int, entry_ids: Sequence[int],
                   datas: Sequence[bytes]) -> bytes:
    """The MESSAGE frames of a run of entries never redelivered and without an ack set, back to
    back: message(consumer_id, ledger_id, entry_id, partition, 0, None, data) for each."""
    if len(entry_ids) != len(datas):
        raise ValueError("entry_ids and datas differ in length")
    return MessageEncoder(consumer_id, ledger_id, partition).frames(entry_ids, datas)


class FrameEncoder(Protocol):
    """A consumer's MESSAGE frames from one ledger (message_encoder() gives one)."""

    consumer_id: int
    ledger_id: int
    partition: int

    def frame(self, entry_id: int, redelivery_count: int, ack_set: Sequence[int] | None, data: bytes) -> bytes:
        """message(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, data)."""
        ...

    def frames(self, entry_ids: Sequence[int], datas: Sequence[bytes]) -> bytes:
        """frame(entry_id, 0, None, data) of each, back to back."""
        ...


class MessageEncoder:
    """MESSAGE frames for one consumer (consumer id, partition) from one ledger, with the
    ids that do not change encoded once: frame(...) returns the bytes of
    message(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, data)."""

    __slots__ = ("_head", "_mid_head", "_mid_tail", "consumer_id", "ledger_id", "partition")

    def __init__(self, consumer_id: int, ledger_id: int, partition: int) -> None:
        self.consumer_id = consumer_id
        self.ledger_id = ledger_id
        self.partition = partition
        self._head = b"\x08" + varint(consumer_id) + b"\x12"
        self._mid_head = b"\x08" + varint(ledger_id) + b"\x10"
        self._mid_tail = b"\x18" + varint(partition) if partition >= 0 else b""

    def frame(self, entry_id: int, redelivery_count: int, ack_set: Sequence[int] | None, data: bytes) -> bytes:
        if redelivery_count or ack_set:
            return message(self.consumer_id, self.ledger_id, entry_id, self.partition, redelivery_count,
                           ack_set, data)
        mid = self._mid_head + varint(entry_id) + self._mid_tail
        # the body is at most 11 + 1 + 33 bytes: its length and the id's take one byte each
        body = self._head + _BYTE[len(mid)] + mid
        n = len(body) + 4
        return b"".join((_HEADER.pack(n + 4 + len(data), n), _MESSAGE_TYPE, _BYTE[len(body)], body, data))

    def frames(self, entry_ids: Sequence[int], datas: Sequence[bytes]) -> bytes:
        frame = self.frame
        return b"".join([frame(eid, 0, None, data) for eid, data in zip(entry_ids, datas, strict=True)])


_c = speedups.consumer_codec


MessageFrame = Callable[[int, int, int, int, int, "Sequence[int] | None", bytes], bytes]
MessageFrames = Callable[[int, int, int, Sequence[int], Sequence[bytes]], bytes]


class _CompiledEncoder:
    """FrameEncoder over the compiled codec's message_frame / message_frames."""

    __slots__ = ("_frame", "_frames", "consumer_id", "ledger_id", "partition")

    def __init__(self, consumer_id: int, ledger_id: int, partition: int, frame: MessageFrame,
                 frames: MessageFrames) -> None:
        self.consumer_id = consumer_id
        self.ledger_id = ledger_id
        self.partition = partition
        self._frame = frame
        self._frames = frames

    def frame(self, entry_id: int, redelivery_count: int, ack_set: Sequence[int] | None, data: bytes) -> bytes:
        return self._frame(self.consumer_id, self.ledger_id, entry_id, self.partition, redelivery_count, ack_set,
                           data)

    def frames(self, entry_ids: Sequence[int], datas: Sequence[bytes]) -> bytes:
        return self._frames(self.consumer_id, self.ledger_id, self.partition, entry_ids, datas)


def message_encoder(consumer_id: int, ledger_id: int, partition: int) -> FrameEncoder:
    """The MESSAGE encoder of a consumer for one ledger: compiled when built, else MessageEncoder."""
    if _c is not None:
        return _CompiledEncoder(consumer_id, ledger_id, partition, _c.message_frame, _c.message_frames)
    return MessageEncoder(consumer_id, ledger_id, partition)


encode_pending_receipts: Callable[[int, int, Sequence[tuple[int, int, int | None, int]]], bytes] = (
    _c.pending_receipts if _c is not None else pending_receipts
)
