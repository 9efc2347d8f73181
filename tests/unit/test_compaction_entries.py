"""What compaction reads from and writes for one entry (broker/compaction/compaction_entries.py): keys,
tombstones, keyless messages, batches rewritten with compacted_out, no sockets."""
from __future__ import annotations

from letterbox.broker.compaction.compaction_entries import (
    NOT_BATCHED,
    KeyedMessage,
    compacted_copy,
    compacted_out_mask,
    keyed_messages,
)
from letterbox.protocol import build_headers_and_payload, parse_headers_and_payload, pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.compression import LZ4, compress
from letterbox.storage.entry import Entry
from letterbox.storage.position import Position


def _single(payload: bytes, key: str | None = None, null: bool = False) -> Entry:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=5)
    if key is not None:
        meta.partition_key = key
    if null:
        meta.null_value = True
    return Entry(Position(1, 7), build_headers_and_payload(meta, payload), 1, 5)


def _batch(messages: list[tuple[str | None, bytes]], codec: int = 0) -> Entry:
    singles = []
    for key, body in messages:
        single = pb.SingleMessageMetadata(payload_size=len(body))
        if key is not None:
            single.partition_key = key
        singles.append((single, body))
    raw = build_batch_payload(singles)
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=5,
                              num_messages_in_batch=len(messages))
    if codec:
        meta.compression = codec  # type: ignore[assignment]
        meta.uncompressed_size = len(raw)
        raw = compress(codec, raw)
    return Entry(Position(1, 9), build_headers_and_payload(meta, raw), len(messages), 5)


def test_single_messages_key_tombstone_and_keyless() -> None:
    assert keyed_messages(_single(b"v", "a").data) == [KeyedMessage(NOT_BATCHED, "a", False)]
    assert keyed_messages(_single(b"", "a").data) == [KeyedMessage(NOT_BATCHED, "a", True)]
    assert keyed_messages(_single(b"x", "a", null=True).data) == [KeyedMessage(NOT_BATCHED, "a", True)]
    assert keyed_messages(_single(b"v").data) == [KeyedMessage(NOT_BATCHED, None, False)]
    entry = _single(b"v", "a")
    assert compacted_copy(entry, {NOT_BATCHED}) is entry
    assert compacted_copy(entry, set()) is None


def test_batch_rewritten_with_compacted_out_keeps_indexes() -> None:
    for codec in (0, LZ4):
        entry = _batch([("a", b"a1"), ("b", b"b1"), (None, b"nokey"), ("a", b"a2")], codec)
        assert [(m.index, m.key, m.is_null) for m in keyed_messages(entry.data)] == [
            (0, "a", False), (1, "b", False), (2, None, False), (3, "a", False)]
        copy = compacted_copy(entry, {1, 3})
        assert copy is not None and copy.position == entry.position and copy.num_messages == 4
        parsed = parse_headers_and_payload(copy.data)
        assert parsed.checksum_ok and parsed.metadata.compression == 0
        singles = list(iter_single_messages(parsed.payload, 4))
        assert [(s.compacted_out, body) for s, body in singles] == [
            (True, b""), (False, b"b1"), (True, b""), (False, b"a2")]
        assert compacted_out_mask(copy.data) == (4, 0b0101)
        # read again by a later compaction: the compacted_out messages are not messages any more
        assert [m.index for m in keyed_messages(copy.data)] == [1, 3]
        assert compacted_copy(copy, {1, 3}) is copy


def test_whole_batch_kept_as_it_is() -> None:
    entry = _batch([("a", b"1"), ("b", b"2")])
    assert compacted_copy(entry, {0, 1}) is entry
    assert compacted_out_mask(entry.data) == (2, 0)
    assert compacted_out_mask(_single(b"v", "a").data) == (1, 0)
