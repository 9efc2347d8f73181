"""The entry a moved message becomes (broker/moves/moved_entry.py), without a broker: a batch
of which one message is left becomes that message alone, every component kept."""
from __future__ import annotations

import struct
import zlib

from letterbox.broker.moves.moved_entry import build_moved_entry
from letterbox.protocol import (
    build_headers_and_payload,
    iter_single_messages,
    parse_headers_and_payload,
    pb,
)
from letterbox.protocol.text_fields import raw_key_value, raw_string_field

RAW = b"\xff\xferaw"  # not UTF-8: must come back byte for byte


def _batch(compressed: bool) -> bytes:
    parts = []
    for i in range(3):
        single = pb.SingleMessageMetadata(payload_size=len(f"body-{i}"), event_time=7000 + i,
                                          ordering_key=f"ok-{i}".encode())
        single.properties.add(key="i", value=str(i))
        raw = raw_key_value(1, "odd", RAW) + raw_string_field(2, RAW) if i == 1 else b""
        if i != 1:
            single.partition_key = f"key-{i}"
        encoded = single.SerializeToString() + raw
        parts.append(struct.pack(">I", len(encoded)) + encoded + f"body-{i}".encode())
    payload = b"".join(parts)
    meta = pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1000, num_messages_in_batch=3,
                              partition_key="batch-key")
    if compressed:
        meta.compression = pb.ZLIB
        meta.uncompressed_size = len(payload)
        payload = zlib.compress(payload)
    return build_headers_and_payload(meta, payload)


def _move(data: bytes, skip: frozenset[int]) -> tuple[bytes, int] | None:
    return build_moved_entry(data, ledger_id=5, entry_id=9, partition=-1, extra={"REASON": "x"},
                             skip_indexes=skip, producer_name="mover", sequence_id=0, publish_time=2000)


def test_one_message_left_of_a_batch_is_moved_alone_with_its_components() -> None:
    for compressed in (False, True):
        built = _move(_batch(compressed), frozenset({0, 2}))
        assert built is not None and built[1] == 1
        parsed = parse_headers_and_payload(built[0])
        meta = parsed.metadata
        assert not meta.HasField("num_messages_in_batch") and meta.compression == pb.NONE
        assert bytes(parsed.payload) == b"body-1"
        assert (meta.event_time, meta.ordering_key) == (7001, b"ok-1")
        assert meta.partition_key == RAW, "the batch's key is replaced by the message's, byte for byte"
        props = {kv.key: kv.value for kv in meta.properties}
        assert props["i"] == "1" and props["odd"] == RAW and props["REASON"] == "x"
        assert props["ORIGIN_MESSAGE_ID"] == "5:9:-1:1" and props["ORIGIN_PUBLISH_TIME"] == "1000"


def test_several_messages_left_stay_one_batch_of_them() -> None:
    built = _move(_batch(True), frozenset({1}))
    assert built is not None and built[1] == 2
    parsed = parse_headers_and_payload(built[0])
    assert parsed.metadata.num_messages_in_batch == 2 and parsed.metadata.compression == pb.NONE
    messages = list(iter_single_messages(bytes(parsed.payload), 2))
    assert [body for _, body in messages] == [b"body-0", b"body-2"]
    assert [{kv.key: kv.value for kv in s.properties}["ORIGIN_MESSAGE_ID"] for s, _ in messages] == \
        ["5:9:-1:0", "5:9:-1:2"]
