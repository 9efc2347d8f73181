# Building the entry that a message becomes when the broker moves it to another
# topic (a dead letter topic, a retry topic, back from a DLQ). The original's
# payload, key, ordering key, properties, event time and schema version are
# kept; ORIGIN_MESSAGE_ID (written `ledger:entry:partition:batchIndex`) and
# ORIGIN_PUBLISH_TIME are added unless the message already carries them (a
# message moved twice keeps its first origin), then the caller's properties
# are laid over. A batch is reopened (decompressed if needed) so that messages
# left out (already acknowledged, or not the one being moved) are dropped and
# every message carries the properties. A batch of which one message is left
# becomes that message alone, outside any batch (its key, ordering key, event
# time and properties lifted onto the entry's metadata, uncompressed): its id in
# the target is `ledger:entry:partition:-1`, the id the move answers and the
# dead letter listing gives, as a message Pulsar's client republishes one by one.
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
from letterbox.protocol import build_headers_and_payload, parse_entry, parse_headers_and_payload, pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.compression import DEFAULT_LIMIT, NONE, declared_size, decompress
from letterbox.protocol.text_fields import raw_key_value, raw_string_field

if TYPE_CHECKING:
    pass

SchemaMap = Callable[[bytes], "bytes | None"]
_PROPERTIES = pb.MessageMetadata.DESCRIPTOR.fields_by_name["properties"].number
_PARTITION_KEY = pb.MessageMetadata.DESCRIPTOR.fields_by_name["partition_key"].number


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
    # parsed for this call alone: changed in place. The stored entry's checksum is not checked
    # again (a SEND's was when it was published, a disk row's when it was read); the moved
    # entry gets a new one.
    meta, payload = parse_entry(data)
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
        return build_headers_and_payload(meta, payload), 1

    raw = decompress(meta.compression, payload, declared_size(meta), limit)
    kept: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    for index, (single, body) in enumerate(iter_single_messages(raw, meta.num_messages_in_batch)):
        if index in skip_indexes:
            continue
        stamp(single.properties, index)
        kept.append((single, body))
    if not kept:
        return None
    meta.compression = NONE
    meta.ClearField("uncompressed_size")
    if len(kept) == 1:
        single, body = kept[0]
        return build_headers_and_payload(_lift_single(meta, single), body), 1
    payload = build_batch_payload(kept)
    meta.num_messages_in_batch = len(kept)
    return build_headers_and_payload(meta, payload), len(kept)


def _lift_single(meta: pb.MessageMetadata, single: pb.SingleMessageMetadata) -> bytes:
    """`meta` (a batch's) made the metadata of its one message `single`, serialized: the
    message's properties, key, ordering key, event time and null flags replace the batch's.
    A key or property that is not UTF-8 is written back byte for byte."""
    meta.ClearField("num_messages_in_batch")
    for name in ("properties", "partition_key", "partition_key_b64_encoded", "ordering_key",
                 "null_value", "null_partition_key"):
        meta.ClearField(name)
    raw = b""
    for kv in single.properties:
        key, value = kv.key, kv.value
        if isinstance(key, bytes) or isinstance(value, bytes):
            raw += raw_key_value(_PROPERTIES, key, value)
        else:
            meta.properties.add(key=key, value=value)
    if single.HasField("partition_key"):
        if isinstance(single.partition_key, bytes):
            raw += raw_string_field(_PARTITION_KEY, single.partition_key)
        else:
            meta.partition_key = single.partition_key
        meta.partition_key_b64_encoded = single.partition_key_b64_encoded
    if single.HasField("ordering_key"):
        meta.ordering_key = single.ordering_key
    if single.HasField("event_time"):
        meta.event_time = single.event_time
    if single.null_value:
        meta.null_value = True
    if single.null_partition_key:
        meta.null_partition_key = True
    return meta.SerializeToString() + raw


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
