# One stored entry as Pulsar's admin API returns a message (peek, get by id,
# examine): the payload in the body (decompressed; a batch as its raw batch
# payload, every message with its single-message metadata, as Pulsar does),
# the metadata in X-Pulsar-* headers with Pulsar's names and formats
# (times as ISO-8601 with milliseconds, X-Pulsar-Message-ID "ledger:entry",
# binary fields base64 under X-Pulsar-Base64-*).
from __future__ import annotations

import base64
from datetime import UTC, datetime

from aiohttp import web

from letterbox.protocol import parse_headers_and_payload, pb
from letterbox.protocol.compression import decompress
from letterbox.storage.entry import Entry


def format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def message_response(entry: Entry) -> web.Response:
    parsed = parse_headers_and_payload(entry.data)
    meta = parsed.metadata
    h: list[tuple[str, str]] = [("X-Pulsar-Message-ID", f"{entry.position.ledger_id}:{entry.position.entry_id}")]
    for kv in meta.properties:
        h.append(("X-Pulsar-PROPERTY-" + kv.key, kv.value))
    if meta.HasField("publish_time"):
        h.append(("X-Pulsar-publish-time", format_time(meta.publish_time)))
    if meta.HasField("event_time"):
        h.append(("X-Pulsar-event-time", format_time(meta.event_time)))
    if meta.HasField("deliver_at_time"):
        h.append(("X-Pulsar-deliver-at-time", format_time(meta.deliver_at_time)))
    if meta.HasField("num_messages_in_batch"):
        h.append(("X-Pulsar-num-batch-message", str(meta.num_messages_in_batch)))
        h.append(("X-Pulsar-batch-size", str(len(entry.data) - len(parsed.metadata_bytes))))
    if meta.HasField("null_value"):
        h.append(("X-Pulsar-null-value", _flag(meta.null_value)))
    if meta.HasField("num_chunks_from_msg"):
        h.append(("X-Pulsar-PROPERTY-TOTAL-CHUNKS", str(meta.num_chunks_from_msg)))
        h.append(("X-Pulsar-PROPERTY-CHUNK-ID", str(meta.chunk_id)))
    h.append(("X-Pulsar-Is-Encrypted", _flag(len(meta.encryption_keys) > 0)))
    if meta.HasField("producer_name"):
        h.append(("X-Pulsar-producer-name", meta.producer_name))
    if meta.HasField("sequence_id"):
        h.append(("X-Pulsar-sequence-id", str(meta.sequence_id)))
    if meta.HasField("replicated_from"):
        h.append(("X-Pulsar-replicated-from", meta.replicated_from))
    for cluster in meta.replicate_to:
        h.append(("X-Pulsar-replicated-to", cluster))
    if meta.HasField("partition_key"):
        h.append(("X-Pulsar-partition-key", meta.partition_key))
    if meta.HasField("compression"):
        h.append(("X-Pulsar-compression", pb.CompressionType.Name(meta.compression)))
    if meta.HasField("uncompressed_size"):
        h.append(("X-Pulsar-uncompressed-size", str(meta.uncompressed_size)))
    if meta.HasField("encryption_algo"):
        h.append(("X-Pulsar-encryption-algo", meta.encryption_algo))
    if meta.HasField("schema_version"):
        h.append(("X-Pulsar-Base64-schema-version", base64.b64encode(meta.schema_version).decode()))
    if meta.HasField("partition_key_b64_encoded"):
        h.append(("X-Pulsar-partition-key-b64-encoded", _flag(meta.partition_key_b64_encoded)))
    if meta.HasField("ordering_key"):
        h.append(("X-Pulsar-Base64-ordering-key", base64.b64encode(meta.ordering_key).decode()))
    if meta.HasField("marker_type"):
        h.append(("X-Pulsar-marker-type", str(meta.marker_type)))
    if meta.HasField("highest_sequence_id"):
        h.append(("X-Pulsar-highest-sequence-id", str(meta.highest_sequence_id)))
    if meta.HasField("uuid"):
        h.append(("X-Pulsar-uuid", meta.uuid))
    if meta.HasField("num_chunks_from_msg"):
        h.append(("X-Pulsar-num-chunks-from-msg", str(meta.num_chunks_from_msg)))
    if meta.HasField("total_chunk_msg_size"):
        h.append(("X-Pulsar-total-chunk-msg-size", str(meta.total_chunk_msg_size)))
    if meta.HasField("chunk_id"):
        h.append(("X-Pulsar-chunk-id", str(meta.chunk_id)))
    if meta.HasField("null_partition_key"):
        h.append(("X-Pulsar-null-partition-key", _flag(meta.null_partition_key)))
    body = decompress(meta.compression, bytes(parsed.payload), meta.uncompressed_size)
    resp = web.Response(body=body, content_type="application/octet-stream")
    for key, value in h:
        resp.headers.add(key, value)
    return resp
