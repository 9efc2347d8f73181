# Building the entry that lands in a dead letter topic. The original's payload,
# key, ordering key, properties, event time and schema version are kept; the
# broker adds REAL_TOPIC and ORIGIN_MESSAGE_ID (the seeds' names, id written
# `ledger:entry:partition:batchIndex`) and its own record of why and when.
# A batch is reopened (decompressed if needed) so that messages already
# acknowledged in it are left out and every message carries the properties.
from __future__ import annotations

from collections.abc import Mapping

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from letterbox.message_properties import ORIGIN_MESSAGE_ID, ORIGIN_PUBLISH_TIME, origin_message_id
from letterbox.protocol import build_headers_and_payload, parse_headers_and_payload, pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.compression import NONE, decompress


def build_dead_letter_entry(
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
) -> tuple[bytes, int] | None:
    """Return (headers_and_payload, message count) for the DLQ, or None if nothing is left."""
    parsed = parse_headers_and_payload(data)
    meta = pb.MessageMetadata()
    meta.CopyFrom(parsed.metadata)
    original_publish = meta.publish_time
    meta.producer_name = producer_name
    meta.sequence_id = sequence_id
    meta.publish_time = publish_time
    meta.ClearField("replicated_from")
    meta.ClearField("deliver_at_time")

    def stamp(props: RepeatedCompositeFieldContainer[pb.KeyValue], batch_index: int) -> None:
        kv = {p.key: p.value for p in props}
        kv.update(extra)
        kv[ORIGIN_MESSAGE_ID] = origin_message_id(ledger_id, entry_id, partition, batch_index)
        kv[ORIGIN_PUBLISH_TIME] = str(original_publish)
        del props[:]
        for k, v in kv.items():
            props.add(key=k, value=v)

    if not meta.HasField("num_messages_in_batch"):
        stamp(meta.properties, -1)
        return build_headers_and_payload(meta, bytes(parsed.payload)), 1

    raw = decompress(meta.compression, bytes(parsed.payload), meta.uncompressed_size)
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
