"""Frames carrying bytes the Python protobuf API will not put in a string field
(invalid UTF-8): a command is built with a same-length ASCII marker and the
marker's bytes are replaced in the serialized frame, so lengths stay right."""
from __future__ import annotations

import time

from letterbox.protocol import build_headers_and_payload, encode_payload_command, pb

T = pb.BaseCommand
INVALID_UTF8 = b"\xff\xfe\xc3("  # the consumer name


def marker(value: bytes) -> str:
    """A unique ASCII text as long as `value`, to stand in for it."""
    base = "QzX"
    return (base * (len(value) // len(base) + 1))[: len(value)]


def poisoned(frame: bytes, value: bytes) -> bytes:
    """`frame` with its one occurrence of marker(value) replaced by `value`."""
    m = marker(value).encode()
    assert frame.count(m) == 1, "the marker must occur exactly once"
    return frame.replace(m, value)


def metadata_bytes(metadata: pb.MessageMetadata, hostile: bytes | None = None) -> bytes:
    """The serialized metadata with marker(hostile) replaced by `hostile`."""
    meta = metadata.SerializeToString()
    if hostile is not None:
        m = marker(hostile).encode()
        assert meta.count(m) == 1
        meta = meta.replace(m, hostile)
    return meta


def send_frame(producer_id: int, seq: int, payload: bytes, metadata: pb.MessageMetadata | bytes,
               hostile: bytes | None = None) -> bytes:
    """A SEND whose metadata has marker(hostile) replaced by `hostile` (checksum over the result)."""
    meta = metadata if isinstance(metadata, bytes) else metadata_bytes(metadata, hostile)
    cmd = T(type=T.SEND, send=pb.CommandSend(producer_id=producer_id, sequence_id=seq, num_messages=1))
    return encode_payload_command(cmd, build_headers_and_payload(meta, payload))


def metadata(producer_name: str, seq: int, **fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name=producer_name, sequence_id=seq,
                              publish_time=int(time.time() * 1000), **fields)  # type: ignore[arg-type]
