# One stored entry as Pulsar's admin API returns a message (peek, get by id,
# examine): the payload in the body (decompressed; a batch as its raw batch
# payload, every message with its single-message metadata, as Pulsar does),
# the metadata in X-Pulsar-* headers with Pulsar's names and formats
# (times as ISO-8601 with milliseconds, X-Pulsar-Message-ID "ledger:entry",
# binary fields base64 under X-Pulsar-Base64-*).
# A stored payload that cannot be opened (bad compression, expanding beyond its
# declared size or max_message_size) is answered as stored, with
# X-Letterbox-Payload-Error saying why: decompression is bounded by the limit,
# runs in a worker thread above OFF_LOOP_BYTES, and never turns into a 500.
# Text fields are stored as sent: bytes that are not UTF-8 and control
# characters (which a header cannot carry) are written as \xNN escapes; a
# header value longer than MAX_HEADER_CHARS is cut there and ends in "…", and
# X-Letterbox-Truncated counts the values cut (the whole value: the message
# itself, through a consumer or a reader).
from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from letterbox.protocol import MalformedFrame, parse_headers_and_payload, pb
from letterbox.protocol.compression import CompressionError, declared_size, decompress
from letterbox.protocol.message_check import needs_expanding, opaque
from letterbox.protocol.text_fields import as_text
from letterbox.storage.entry import Entry

OFF_LOOP_BYTES = 256 * 1024
PAYLOAD_ERROR = "X-Letterbox-Payload-Error"


def format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _flag(value: bool) -> str:
    return "true" if value else "false"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


MAX_HEADER_CHARS = 4096
TRUNCATED = "X-Letterbox-Truncated"


def _text(value: str | bytes) -> str:
    """A text field as a header can carry it (at most MAX_HEADER_CHARS + 1 characters)."""
    text = as_text(value)
    if len(text) > MAX_HEADER_CHARS:
        text = text[:MAX_HEADER_CHARS] + "…"
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


# Optional metadata fields sent as one header each when set: field, header, format.
Fields = tuple[tuple[str, str, Callable[[Any], str]], ...]
_TIMES: Fields = (
    ("publish_time", "X-Pulsar-publish-time", format_time),
    ("event_time", "X-Pulsar-event-time", format_time),
    ("deliver_at_time", "X-Pulsar-deliver-at-time", format_time),
)
_FIELDS: Fields = (
    ("producer_name", "X-Pulsar-producer-name", _text),
    ("sequence_id", "X-Pulsar-sequence-id", str),
    ("replicated_from", "X-Pulsar-replicated-from", _text),
    ("partition_key", "X-Pulsar-partition-key", _text),
    ("compression", "X-Pulsar-compression", pb.CompressionType.Name),
    ("uncompressed_size", "X-Pulsar-uncompressed-size", str),
    ("encryption_algo", "X-Pulsar-encryption-algo", _text),
    ("schema_version", "X-Pulsar-Base64-schema-version", _b64),
    ("partition_key_b64_encoded", "X-Pulsar-partition-key-b64-encoded", _flag),
    ("ordering_key", "X-Pulsar-Base64-ordering-key", _b64),
    ("marker_type", "X-Pulsar-marker-type", str),
    ("highest_sequence_id", "X-Pulsar-highest-sequence-id", str),
    ("uuid", "X-Pulsar-uuid", _text),
    ("num_chunks_from_msg", "X-Pulsar-num-chunks-from-msg", str),
    ("total_chunk_msg_size", "X-Pulsar-total-chunk-msg-size", str),
    ("chunk_id", "X-Pulsar-chunk-id", str),
    ("null_partition_key", "X-Pulsar-null-partition-key", _flag),
)


def _set_fields(meta: pb.MessageMetadata, present: set[str], fields: Fields) -> list[tuple[str, str]]:
    return [(header, fmt(getattr(meta, name))) for name, header, fmt in fields if name in present]


async def message_response(entry: Entry, limit: int) -> web.Response:
    """The admin API's answer for one stored message; payloads expand to at most `limit` bytes."""
    try:
        parsed = parse_headers_and_payload(entry.data)
    except MalformedFrame as exc:
        resp = web.Response(body=entry.data, content_type="application/octet-stream")
        resp.headers.add("X-Pulsar-Message-ID", f"{entry.position.ledger_id}:{entry.position.entry_id}")
        resp.headers.add(PAYLOAD_ERROR, f"cannot parse the stored message: {exc}")
        return resp
    meta = parsed.metadata
    present = {fd.name for fd, _ in meta.ListFields()}
    h: list[tuple[str, str]] = [("X-Pulsar-Message-ID", f"{entry.position.ledger_id}:{entry.position.entry_id}")]
    for kv in meta.properties:
        h.append(("X-Pulsar-PROPERTY-" + _text(kv.key), _text(kv.value)))
    h += _set_fields(meta, present, _TIMES)
    if meta.HasField("num_messages_in_batch"):
        h.append(("X-Pulsar-num-batch-message", str(meta.num_messages_in_batch)))
        h.append(("X-Pulsar-batch-size", str(len(entry.data) - len(parsed.metadata_bytes))))
    if meta.HasField("null_value"):
        h.append(("X-Pulsar-null-value", _flag(meta.null_value)))
    if meta.HasField("num_chunks_from_msg"):
        h.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", str(meta.num_chunks_from_msg)))
        h.append(("X-Pulsar-PROPERTY-CHUNK-ID", str(meta.chunk_id)))
    h.append(("X-Pulsar-Is-Encrypted", _flag(len(meta.encryption_keys) > 0)))
    h += _set_fields(meta, present, _FIELDS)
    for cluster in meta.replicate_to:
        h.append(("X-Pulsar-replicated-to", _text(cluster)))
    body, error = await _payload(meta, bytes(parsed.payload), limit)
    if error is not None:
        h.append((PAYLOAD_ERROR, error))
    cut = sum(1 for _, value in h if value.endswith("…") and len(value) > MAX_HEADER_CHARS)
    if cut:
        h.append((TRUNCATED, str(cut)))
    resp = web.Response(body=body, content_type="application/octet-stream")
    for key, value in h:
        resp.headers.add(key, value)
    return resp


async def _payload(meta: pb.MessageMetadata, stored: bytes, limit: int) -> tuple[bytes, str | None]:
    """The payload to answer with, and why it is the stored bytes rather than the expanded ones."""
    if opaque(meta):
        return stored, None
    args = (meta.compression, stored, declared_size(meta), limit)
    try:
        if needs_expanding(meta) > OFF_LOOP_BYTES:
            return await asyncio.to_thread(decompress, *args), None
        return decompress(*args), None
    except CompressionError as exc:
        return stored, f"payload left as stored: {exc}"
