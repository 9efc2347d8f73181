# Building the entry that a message becomes when the broker moves it to another
# topic (a dead letter topic, a retry topic, back from a DLQ). The original's
# payload, key, ordering key, properties, event time and schema version are
# kept; ORIGIN_MESSAGE_ID (written `ledger:entry:partition:batchIndex`) and
# ORIGIN_PUBLISH_TIME are added unless the message already carries them (a
# message moved twice keeps its first origin), then the caller's properties
# are laid over. A batch is reopened (decompressed if needed) so that messages
# left out (already acknowledged, or not the one being moved) are dropped and
# every message carries the properties.
# A batch that cannot be reopened (malformed) is moved as raw bytes instead
# (build_raw_moved_entry): the original payload untouched, the properties on
# the entry's metadata; if even the metadata is unreadable, the entry as it is.
# `schema` (a schema_registry.SchemaCarry) gives the target's schema version for the
# source's: the message is re-stamped with it (or without one where it gives None).
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from letterbox.message_properties import (
    ORIGIN_MESSAGE_ID,
    ORIGIN_PUBLISH_TIME,
    origin_message_id,
)
from letterbox.protocol import build_headers_and_payload, parse_headers_and_payload, pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.compression import DEFAULT_LIMIT, NONE, declared_size, decompress

if TYPE_CHECKING:
    pass

SchemaMap = Callable[[bytes], "bytes | None"]


def carry_schema(meta: pb.MessageMetadata, schema: SchemaMap | None) -> None:
    """Re-stamp `meta`'s schema version with the target's (see SchemaCarry)."""
    if schema is None or not meta.HasField("schema_version"):
        return
    carried = schema(meta.schema_version)
    if carried is None:
        meta.ClearField("schema_version")
    else:
        meta.schema_version = carried


def build_moved_entry(
    data: bytes,
    *,
    ledger_id: int,
    entry_id: int,
    partition: int,
    extra: Mapping[str, str],
    skip_indexes: frozenset[int] = frozenset(),
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    keep_if_present: Mapping[str, str] | None = None,
    deliver_at: int | None = None,
    limit: int = DEFAULT_LIMIT,
    schema: SchemaMap | None = None,
) -> tuple[bytes, int] | None:
    """Return (headers_and_payload, message count) for the target topic, or None if
    nothing is left. `keep_if_present` are set only where the message has no value."""
    parsed = parse_headers_and_payload(data)
    meta = parsed.metadata  # parsed for this call alone: changed in place
    original_publish = meta.publish_time
    meta.producer_name = producer_name
    meta.sequence_id = sequence_id
    meta.publish_time = publish_time
    meta.ClearField("replicated_from")
    meta.ClearField("deliver_at_time")
    carry_schema(meta, schema)
    if deliver_at is not None:
        meta.deliver_at_time = deliver_at

    def stamp(props: RepeatedCompositeFieldContainer[pb.KeyValue], batch_index: int) -> None:
        defaults = {ORIGIN_MESSAGE_ID: origin_message_id(ledger_id, entry_id, partition, batch_index),
                    ORIGIN_PUBLISH_TIME: str(original_publish), **(keep_if_present or {})}
        _stamp(props, defaults, extra)

    if not meta.HasField("num_messages_in_batch"):
        stamp(meta.properties, -1)
        return build_headers_and_payload(meta, bytes(parsed.payload)), 1

    raw = decompress(meta.compression, bytes(parsed.payload), declared_size(meta), limit)
    kept: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    for index, (single, body) in enumerate(iter_single_messages(raw, meta.num_messages_in_batch)):
        if index in skip_indexes:
            continue
        stamp(single.properties, index)
        kept.append((single, body))
    if not kept:
        return None
    payload = build_batch_payload(kept)
    meta.compression = NONE
    meta.ClearField("uncompressed_size")
    meta.num_messages_in_batch = len(kept)
    return build_headers_and_payload(meta, payload), len(kept)


def build_raw_moved_entry(
    data: bytes,
    *,
    ledger_id: int,
    entry_id: int,
    partition: int,
    num_messages: int,
    extra: Mapping[str, str],
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    schema: SchemaMap | None = None,
) -> bytes:
    """The entry moved as raw bytes: its payload unchanged (still compressed and
    batched as it was), `extra` and the origin on its metadata. An entry whose
    metadata cannot be read is returned as it is."""
    try:
        parsed = parse_headers_and_payload(data)
        meta = pb.MessageMetadata()
        meta.CopyFrom(parsed.metadata)
        _stamp(meta.properties, {ORIGIN_MESSAGE_ID: origin_message_id(ledger_id, entry_id, partition, -1),
                                 ORIGIN_PUBLISH_TIME: str(meta.publish_time)}, extra)
        meta.producer_name = producer_name
        meta.sequence_id = sequence_id
        meta.publish_time = publish_time
        meta.ClearField("deliver_at_time")
        carry_schema(meta, schema)
        return build_headers_and_payload(meta, bytes(parsed.payload))
    except Exception:
        return data


def _stamp(props: RepeatedCompositeFieldContainer[pb.KeyValue], defaults: Mapping[str, str],
           extra: Mapping[str, str]) -> None:
    """Add `defaults` where the message has no such key and set `extra`, in place: the
    message's other properties stay as they were sent, byte for byte (a key or value
    that is not UTF-8 reads as bytes and cannot be written back through the API)."""
    at = {p.key: p for p in props}
    for k, v in defaults.items():
        if k not in at and k not in extra:
            at[k] = props.add(key=k, value=v)
    for k, v in extra.items():
        if k in at:
            at[k].value = v
        else:
            at[k] = props.add(key=k, value=v)
