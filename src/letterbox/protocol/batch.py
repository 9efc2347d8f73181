# Batched payloads: when MessageMetadata.num_messages_in_batch is set, the
# (decompressed) payload is a sequence of
#     [u32 BE size][SingleMessageMetadata][payload_size bytes]
# one per message. This module splits and builds such payloads.
#
# Invariants: each SingleMessageMetadata.payload_size equals the length of the
# bytes that follow it; truncation or garbage raises MalformedFrame.
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from google.protobuf.message import DecodeError

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.framing import MalformedFrame

_U32 = struct.Struct(">I")


def iter_single_messages(
    payload: bytes, count: int
) -> Iterator[tuple[pb.SingleMessageMetadata, bytes]]:
    view = memoryview(payload)
    n = len(view)
    pos = 0
    for index in range(count):
        if n - pos < 4:
            raise MalformedFrame(f"batch truncated before message {index}")
        size = _U32.unpack_from(view, pos)[0]
        pos += 4
        if size > n - pos:
            raise MalformedFrame(f"batch message {index}: metadata size {size} overruns payload")
        meta = pb.SingleMessageMetadata()
        try:
            meta.ParseFromString(bytes(view[pos : pos + size]))
        except DecodeError as exc:
            raise MalformedFrame(f"batch message {index}: bad metadata: {exc}") from exc
        pos += size
        body_size = meta.payload_size
        if body_size < 0 or body_size > n - pos:
            raise MalformedFrame(f"batch message {index}: payload size {body_size} overruns")
        yield meta, bytes(view[pos : pos + body_size])
        pos += body_size


def build_batch_payload(messages: Iterable[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    """Concatenate messages into a batch payload. Sets each metadata's
    payload_size to the length of its data (mutating the given message)."""
    parts: list[bytes] = []
    for meta, data in messages:
        meta.payload_size = len(data)
        meta_bytes = meta.SerializeToString()
        parts.append(_U32.pack(len(meta_bytes)))
        parts.append(meta_bytes)
        parts.append(data)
    return b"".join(parts)


def count_batch_entries(payload: bytes | memoryview, claimed: int) -> None:
    """Check that `payload` holds exactly `claimed` messages and nothing after
    them, without copying any message body. Raises MalformedFrame saying what
    the payload really holds."""
    view = memoryview(payload)
    n = len(view)
    pos = 0
    meta = pb.SingleMessageMetadata()
    parse = meta.ParseFromString  # bound once: this loop runs once per message of every batch
    unpack = _U32.unpack_from
    for index in range(claimed):
        if n - pos < 4:
            raise MalformedFrame(f"the batch holds {index} messages, not {claimed}")
        (size,) = unpack(view, pos)
        pos += 4
        end = pos + size
        if end > n:
            raise MalformedFrame(f"batch message {index}: metadata size {size} overruns the payload")
        try:
            parse(view[pos:end])  # type: ignore[arg-type]  # upb reads buffers
        except DecodeError as exc:
            raise MalformedFrame(f"batch message {index}: bad metadata: {exc}") from exc
        body = meta.payload_size
        if body < 0 or body > n - end:
            raise MalformedFrame(f"batch message {index}: payload size {body} overruns the payload")
        pos = end + body
    if pos != n:
        raise MalformedFrame(f"the batch holds more than {claimed} messages ({n - pos} bytes follow message {claimed - 1})")
