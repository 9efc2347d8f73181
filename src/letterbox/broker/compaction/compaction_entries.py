# What topic compaction reads from, and writes for, one stored entry (pure: bytes in,
# bytes out; no storage, no loop).
#   keyed_messages(data)  the messages of an entry as (batch index, key, is_null):
#                         batch index -1 for an entry that is not a batch; key None for a
#                         message without a key (Pulsar leaves those out of the compacted
#                         view); is_null for a message whose payload is empty or marked
#                         null_value (a tombstone: it removes its key from the view when
#                         it is inside a batch, and is its key's latest value otherwise).
#                         Messages a previous compaction marked compacted_out are skipped.
#   compacted_copy(entry, keep)
#                         the entry as the compacted view stores it: as it is when every
#                         message of it is kept; a batch rewritten (uncompressed) with the
#                         messages not kept marked compacted_out and emptied, so the batch
#                         indexes -- and with them the message ids -- stay the original
#                         ones; None when nothing is kept.
from __future__ import annotations

from dataclasses import dataclass

from letterbox.protocol import build_headers_and_payload, parse_headers_and_payload, pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.compression import NONE, declared_size, decompress
from letterbox.storage.entry import Entry

NOT_BATCHED = -1


@dataclass(frozen=True, slots=True)
class KeyedMessage:
    index: int
    key: str | None
    is_null: bool


def keyed_messages(data: bytes) -> list[KeyedMessage]:
    parsed = parse_headers_and_payload(data)
    meta = parsed.metadata
    if not meta.HasField("num_messages_in_batch"):
        key = meta.partition_key if meta.HasField("partition_key") else None
        return [KeyedMessage(NOT_BATCHED, key, meta.null_value or not parsed.payload)]
    raw = decompress(meta.compression, bytes(parsed.payload), declared_size(meta))
    out: list[KeyedMessage] = []
    for index, (single, body) in enumerate(iter_single_messages(raw, meta.num_messages_in_batch)):
        if single.compacted_out:
            continue
        key = single.partition_key if single.HasField("partition_key") else None
        out.append(KeyedMessage(index, key, single.null_value or not body))
    return out


def compacted_copy(entry: Entry, keep: set[int]) -> Entry | None:
    if not keep:
        return None
    parsed = parse_headers_and_payload(entry.data)
    meta = parsed.metadata
    if not meta.HasField("num_messages_in_batch"):
        return entry if NOT_BATCHED in keep else None
    raw = decompress(meta.compression, bytes(parsed.payload), declared_size(meta))
    singles = list(iter_single_messages(raw, meta.num_messages_in_batch))
    if all(i in keep or single.compacted_out for i, (single, _) in enumerate(singles)):
        return entry
    rebuilt: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    for i, (single, body) in enumerate(singles):
        if i not in keep:
            single.compacted_out = True
            body = b""
        rebuilt.append((single, body))
    new_meta = pb.MessageMetadata()
    new_meta.CopyFrom(meta)
    new_meta.compression = NONE
    new_meta.ClearField("uncompressed_size")
    data = build_headers_and_payload(new_meta, build_batch_payload(rebuilt))
    return Entry(entry.position, data, entry.num_messages, entry.publish_time)


def compacted_out_mask(data: bytes) -> tuple[int, int]:
    """(batch size, bit mask of the messages marked compacted_out); (1, 0) for an entry that
    is not a batch."""
    parsed = parse_headers_and_payload(data)
    meta = parsed.metadata
    if not meta.HasField("num_messages_in_batch"):
        return 1, 0
    raw = decompress(meta.compression, bytes(parsed.payload), declared_size(meta))
    mask = 0
    for index, (single, _) in enumerate(iter_single_messages(raw, meta.num_messages_in_batch)):
        if single.compacted_out:
            mask |= 1 << index
    return meta.num_messages_in_batch, mask
