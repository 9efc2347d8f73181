"""Batched payload split / build."""
from __future__ import annotations

import struct

import pytest

from letterbox.protocol import MalformedFrame, build_batch_payload, iter_single_messages, pb


def _messages() -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    return [
        (pb.SingleMessageMetadata(partition_key="k1", sequence_id=1), b"first"),
        (pb.SingleMessageMetadata(properties=[pb.KeyValue(key="a", value="b")]), b""),
        (pb.SingleMessageMetadata(ordering_key=b"\x01", null_value=True), b"x" * 1000),
    ]


def test_round_trip() -> None:
    msgs = _messages()
    payload = build_batch_payload(msgs)
    out = list(iter_single_messages(payload, len(msgs)))
    assert [data for _, data in out] == [data for _, data in msgs]
    assert [m.payload_size for m, _ in out] == [5, 0, 1000]
    assert out[0][0].partition_key == "k1" and out[0][0].sequence_id == 1
    assert out[1][0].properties[0].value == "b"
    assert out[2][0].ordering_key == b"\x01" and out[2][0].null_value


def test_layout() -> None:
    meta = pb.SingleMessageMetadata()
    payload = build_batch_payload([(meta, b"abc")])
    meta_bytes = pb.SingleMessageMetadata(payload_size=3).SerializeToString()
    assert payload == struct.pack(">I", len(meta_bytes)) + meta_bytes + b"abc"


def test_fewer_requested_than_present() -> None:
    payload = build_batch_payload(_messages())
    assert len(list(iter_single_messages(payload, 2))) == 2


@pytest.mark.parametrize("cut", [1, 3, 5, 10])
def test_truncated(cut: int) -> None:
    payload = build_batch_payload(_messages())
    with pytest.raises(MalformedFrame):
        list(iter_single_messages(payload[:-cut], 3))


def test_count_too_high() -> None:
    payload = build_batch_payload(_messages())
    with pytest.raises(MalformedFrame):
        list(iter_single_messages(payload, 4))


def test_garbage_metadata() -> None:
    with pytest.raises(MalformedFrame):
        list(iter_single_messages(struct.pack(">I", 2) + b"\xff\xff", 1))
