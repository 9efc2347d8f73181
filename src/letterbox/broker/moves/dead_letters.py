# Reading dead letter topics (letterbox extension): the messages of a DLQ
# topic one by one (batches opened), which of them are still "live", filters
# over them (summaries: dead_letter_groups.py). A message is live until a redrive or a
# purge marks it handled; the marks are the acknowledgements of one internal
# durable subscription on the DLQ topic, HANDLED_SUBSCRIPTION (per entry, or
# per batch index), so they persist with the cursor and move atomically with
# a redrive's appends. The DLQ's own subscriptions are not touched.
# A topic counts as a dead letter topic when its name ends in -DLQ or its
# first live message carries DEAD_LETTER_REASON.
# An entry that cannot be opened (bad compression, a payload expanding beyond
# its declared size or max_message_size, a malformed batch) is one DeadLetter
# with its stored payload as is and `error` saying why: one bad message never
# fails a listing, and decompression never allocates more than the limit.
# The async walk (live_dead_letters_async, used by every whole-DLQ scan: listings,
# summaries, redrive counts and selection, purge) gives the event loop back every
# SLICE_SECONDS, so a DLQ of any size never stalls the broker's other clients.
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.failure import HANDLED_SUBSCRIPTION, TopicRole, fingerprint, topic_role
from letterbox.message_properties import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_TIME,
    origin_message_id,
)
from letterbox.protocol import (
    MalformedFrame,
    iter_single_messages,
    parse_entry,
    pb,
)
from letterbox.protocol.compression import (
    DEFAULT_LIMIT,
    CompressionError,
    declared_size,
    decompress,
)
from letterbox.protocol.message_check import needs_expanding, opaque
from letterbox.protocol.text_fields import as_text

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MoveCursor, MovedSubscription, MovedTopic
    from letterbox.storage.entry import Entry

NO_REASON = "unspecified"
READ_CHUNK = 256
# entries expanding to more than this are opened in a worker thread by the async views
OFF_LOOP_BYTES = 256 * 1024
# an async walk gives the event loop back after this much work
SLICE_SECONDS = 0.005


@dataclass
class DeadLetter:
    entry_id: int
    batch_index: int  # -1 outside a batch
    batch_size: int  # 0 outside a batch
    message_id: str  # ledger:entry:partition:batchIndex
    properties: dict[str, str]
    publish_time: int
    event_time: int
    payload: bytes
    key: str | None = None
    key_b64: bool = False
    ordering_key: bytes | None = None
    null_value: bool = False
    schema_version: bytes | None = None
    # why the stored message could not be opened (payload is then the stored bytes)
    error: str | None = None
    # a key or properties that are not UTF-8, as stored; `key` and `properties` have them
    # as text with \xNN escapes (views, filters), a redrive writes these bytes back
    raw_key: bytes | None = None
    raw_properties: tuple[tuple[str | bytes, str | bytes], ...] = ()

    @property
    def reason(self) -> str:
        return self.properties.get(DEAD_LETTER_REASON) or NO_REASON

    @property
    def dead_lettered_at(self) -> int | None:
        try:
            return int(self.properties[DEAD_LETTER_TIME])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class DeadLetterFilter:
    reason: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    after_ms: int | None = None  # DEAD_LETTER_TIME >= after_ms
    before_ms: int | None = None  # DEAD_LETTER_TIME < before_ms
    key: str | None = None  # the message key (partition key) is exactly this
    message_ids: frozenset[str] | None = None  # only these DLQ message ids (ledger:entry:partition:batch)
    group: str | None = None  # only this failure group (failure.fingerprint)

    def matches(self, dl: DeadLetter) -> bool:
        if self.message_ids is not None and dl.message_id not in self.message_ids:
            return False
        if self.group is not None and fingerprint(dl.properties) != self.group:
            return False
        if self.reason is not None and dl.properties.get(DEAD_LETTER_REASON) != self.reason:
            return False
        if self.key is not None and dl.key != self.key:
            return False
        if any(dl.properties.get(k) != v for k, v in self.properties.items()):
            return False
        if self.after_ms is not None or self.before_ms is not None:
            at = dl.dead_lettered_at
            if at is None:
                return False
            if self.after_ms is not None and at < self.after_ms:
                return False
            if self.before_ms is not None and at >= self.before_ms:
                return False
        return True


def handled_subscription(topic: MovedTopic, create: bool) -> MovedSubscription | None:
    sub = topic.subscriptions.get(HANDLED_SUBSCRIPTION)
    if sub is None and create:
        sub = topic.subscription_for(HANDLED_SUBSCRIPTION, True, "earliest", None)
    return sub


def entry_messages(
    entry: Entry, partition: int, skip: frozenset[int] = frozenset(), limit: int = DEFAULT_LIMIT,
    parsed: tuple[pb.MessageMetadata, bytes] | None = None,
) -> list[DeadLetter]:
    """The messages of `entry`; `parsed`: its metadata and stored payload when the caller
    read them already (framing.parse_entry), so the entry is parsed once."""
    if parsed is None:
        try:
            parsed = parse_entry(entry.data)
        except MalformedFrame as exc:
            return [_unreadable(entry, partition, pb.MessageMetadata(), entry.data, f"malformed entry: {exc}")]
    meta, stored = parsed
    try:
        return _open_entry(entry, partition, skip, limit, meta, stored)
    except (CompressionError, MalformedFrame) as exc:
        return [_unreadable(entry, partition, meta, stored, str(exc))]


def _open_entry(entry: Entry, partition: int, skip: frozenset[int], limit: int,
                meta: pb.MessageMetadata, stored: bytes) -> list[DeadLetter]:
    pos = entry.position
    payload = stored if opaque(meta) else decompress(meta.compression, stored, declared_size(meta), limit)
    schema = meta.schema_version if meta.HasField("schema_version") else None
    if not meta.HasField("num_messages_in_batch"):
        return [DeadLetter(
            entry_id=pos.entry_id, batch_index=-1, batch_size=0,
            message_id=origin_message_id(pos.ledger_id, pos.entry_id, partition, -1),
            **_properties(meta.properties),
            publish_time=meta.publish_time, event_time=meta.event_time, payload=payload,
            **_key(meta.partition_key if meta.HasField("partition_key") else None),
            key_b64=meta.partition_key_b64_encoded,
            ordering_key=meta.ordering_key if meta.HasField("ordering_key") else None,
            null_value=meta.null_value, schema_version=schema,
        )]
    out: list[DeadLetter] = []
    size = meta.num_messages_in_batch
    for index, (single, body) in enumerate(list(iter_single_messages(payload, size))):
        if index in skip:
            continue
        out.append(_single(pos.ledger_id, pos.entry_id, partition, index, size, meta, single, body, schema))
    return out


def _unreadable(entry: Entry, partition: int, meta: pb.MessageMetadata, stored: bytes, error: str) -> DeadLetter:
    pos = entry.position
    return DeadLetter(
        entry_id=pos.entry_id, batch_index=-1, batch_size=0,
        message_id=origin_message_id(pos.ledger_id, pos.entry_id, partition, -1),
        **_properties(meta.properties),
        publish_time=meta.publish_time, event_time=meta.event_time, payload=stored,
        error=f"cannot open stored message: {error}",
    )


def _single(ledger_id: int, entry_id: int, partition: int, index: int, size: int, meta: pb.MessageMetadata,
            single: pb.SingleMessageMetadata, body: bytes, schema: bytes | None) -> DeadLetter:
    return DeadLetter(
        entry_id=entry_id, batch_index=index, batch_size=size,
        message_id=origin_message_id(ledger_id, entry_id, partition, index),
        **_properties(single.properties),
        publish_time=meta.publish_time,
        event_time=single.event_time if single.HasField("event_time") else meta.event_time,
        payload=body,
        **_key(single.partition_key if single.HasField("partition_key") else None),
        key_b64=single.partition_key_b64_encoded,
        ordering_key=single.ordering_key if single.HasField("ordering_key") else None,
        null_value=single.null_value, schema_version=schema,
    )


def _properties(pairs: Iterable[pb.KeyValue]) -> dict[str, Any]:
    """DeadLetter's properties (text) and raw_properties (the pairs that are not UTF-8)."""
    text: dict[str, str] = {}
    raw: list[tuple[str | bytes, str | bytes]] = []
    for kv in pairs:
        key, value = kv.key, kv.value
        if type(key) is str and type(value) is str:  # the usual case: text as it is
            text[key] = value
            continue
        raw.append((key, value))
        text[as_text(key)] = as_text(value)
    return {"properties": text, "raw_properties": tuple(raw)}


def _key(key: str | bytes | None) -> dict[str, Any]:
    """DeadLetter's key (text) and raw_key (the bytes of a key that is not UTF-8)."""
    return {"key": None if key is None else as_text(key), "raw_key": key if isinstance(key, bytes) else None}


def stored_message(topic: MovedTopic, entry_id: int, batch_index: int) -> DeadLetter | None:
    """The message at (entry, batch index) of the topic as stored, handled or not (None when
    the entry is gone or holds no such index)."""
    entries = topic.ledger.read_entries(entry_id, 1)
    if not entries or entries[0].position.entry_id != entry_id:
        return None
    found = entry_messages(entries[0], topic.name.partition_index, frozenset(), topic.service.config.max_message_size)
    return next((m for m in found if m.batch_index == batch_index or batch_index < 0), None)


def live_dead_letters(topic: MovedTopic, start_entry: int = 0) -> Iterator[DeadLetter]:
    """Messages of the topic not yet redriven or purged, in order, from `start_entry`."""
    partition = topic.name.partition_index
    limit = topic.service.config.max_message_size
    for entry, skip in _live_entries(topic, start_entry):
        yield from entry_messages(entry, partition, skip, limit)


async def live_dead_letters_async(topic: MovedTopic, start_entry: int = 0,
                                  only_ids: frozenset[str] | None = None,
                                  containing: bytes | None = None) -> AsyncGenerator[DeadLetter, None]:
    """live_dead_letters for the admin views and the redrive's scans: an entry that
    is or expands past OFF_LOOP_BYTES is opened in a worker thread, and the loop is given
    back every SLICE_SECONDS, so walking a large DLQ never stalls the event loop.
    `only_ids` (message ids ledger:entry:partition:batch): only the entries they name are
    read, not the whole topic (the messages of those entries are all yielded).
    `containing`: entries whose properties are stored in plain bytes (not a compressed
    or encrypted batch) and do not contain these bytes are not opened: a lookup of one
    property value (an ORIGIN_MESSAGE_ID) costs a byte search per entry, not a decode."""
    partition = topic.name.partition_index
    limit = topic.service.config.max_message_size
    since = time.perf_counter()
    live = _live_entries(topic, start_entry) if only_ids is None else _named_entries(topic, start_entry, only_ids)
    for entry, skip in live:
        if time.perf_counter() - since >= SLICE_SECONDS:
            await asyncio.sleep(0)
            since = time.perf_counter()
        big = len(entry.data) > OFF_LOOP_BYTES  # large metadata is parsed off the loop too
        try:  # parsed once here; entry_messages opens what this parse read
            parsed: tuple[pb.MessageMetadata, bytes] | None = \
                await asyncio.to_thread(parse_entry, entry.data) if big else parse_entry(entry.data)
        except MalformedFrame:
            parsed = None  # entry_messages reports it
        meta = parsed[0] if parsed is not None else None
        if containing is not None and meta is not None and _plain_properties(meta) \
                and containing not in entry.data:
            continue
        if big or (meta is not None and needs_expanding(meta) > OFF_LOOP_BYTES):
            messages = await asyncio.to_thread(entry_messages, entry, partition, skip, limit, parsed)
        else:
            messages = entry_messages(entry, partition, skip, limit, parsed)
        for dl in messages:
            yield dl


def _plain_properties(meta: pb.MessageMetadata) -> bool:
    """Whether every message property of the entry is stored as plain bytes in it: a single
    message (its metadata), or a batch neither compressed nor encrypted nor chunked."""
    if not meta.HasField("num_messages_in_batch"):
        return True
    return meta.compression == pb.NONE and not opaque(meta)


def _walk_start(topic: MovedTopic, start_entry: int) -> tuple[MoveCursor | None, int]:
    """The handled subscription's cursor (None before any redrive or purge) and the first
    entry id a walk of the topic's live dead letters from `start_entry` can find."""
    sub = handled_subscription(topic, create=False)
    cursor = sub.cursor if sub is not None else None
    first = max(start_entry, topic.ledger.first_position.entry_id)
    if cursor is not None:
        first = max(first, cursor.mark_delete.entry_id + 1)
    return cursor, first


def _named_entries(topic: MovedTopic, start_entry: int, ids: frozenset[str]
                   ) -> Iterator[tuple[Entry, frozenset[int]]]:
    """_live_entries restricted to the entries of this topic's ledger that `ids` name."""
    cursor, first = _walk_start(topic, start_entry)
    ledger = topic.ledger
    wanted: set[int] = set()
    for mid in ids:
        parts = mid.split(":")
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit() and int(parts[0]) == ledger.ledger_id:
            wanted.add(int(parts[1]))
    for eid in sorted(e for e in wanted if first <= e <= ledger.last_confirmed.entry_id):
        if cursor is not None and cursor.is_acked(eid):
            continue
        entries = ledger.read_entries(eid, 1)
        if entries and entries[0].position.entry_id == eid:
            yield entries[0], cursor.acked_indexes(eid) if cursor is not None else frozenset()


def _live_entries(topic: MovedTopic, start_entry: int) -> Iterator[tuple[Entry, frozenset[int]]]:
    """Entries of the topic not wholly redriven or purged, with their handled batch indexes."""
    cursor, eid = _walk_start(topic, start_entry)
    ledger = topic.ledger
    while eid <= ledger.last_confirmed.entry_id:
        entries = ledger.read_entries(eid, READ_CHUNK)
        if not entries:
            return
        for entry in entries:
            e = entry.position.entry_id
            if cursor is not None and cursor.is_acked(e):
                continue
            yield entry, cursor.acked_indexes(e) if cursor is not None else frozenset()
        eid = entries[-1].position.entry_id + 1


def is_dead_letter_topic(topic: MovedTopic) -> bool:
    if topic_role(str(topic.name)) is TopicRole.DEAD_LETTER:
        return True
    first = next(live_dead_letters(topic), None)
    return first is not None and DEAD_LETTER_REASON in first.properties
