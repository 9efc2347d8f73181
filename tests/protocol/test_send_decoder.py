"""The hand-written SEND command decoder (protocol/send_decoder.py) against protobuf:
for any bytes it either returns what protobuf parses or None (take the protobuf path)."""
from __future__ import annotations

import random

import pytest

from letterbox.protocol import FrameDecoder, MalformedFrame, encode_payload_command, pb
from letterbox.protocol.send_decoder import SendCommand, decode_send_command

T = pb.BaseCommand
U64 = (1 << 64) - 1
# what the official client (pulsar-client 3.13, batching off) sends, captured
CLIENT_SEND = bytes.fromhex("0806320408001002")
CLIENT_HP = bytes.fromhex(
    "0e012956da31000000200a157374616e64616c6f6e652d7479366d746578652d30100218adb1b7daa034") + b"x" * 100


def send_bytes(**fields: int) -> bytes:
    cmd = pb.BaseCommand(type=T.SEND)
    for k, v in fields.items():
        setattr(cmd.send, k, v)
    return cmd.SerializeToString()


def as_tuple(c: SendCommand) -> tuple[int, int, int | None, int | None]:
    return c.producer_id, c.sequence_id, c.num_messages, c.highest_sequence_id


def test_client_send_decodes_like_protobuf() -> None:
    fast = decode_send_command(CLIENT_SEND)
    assert fast is not None
    assert as_tuple(fast) == (0, 2, None, None)
    assert as_tuple(fast) == as_tuple(SendCommand.from_pb(T.FromString(CLIENT_SEND).send))


@pytest.mark.parametrize("fields", [
    {"producer_id": 0, "sequence_id": 0},
    {"producer_id": 7, "sequence_id": 1 << 40, "num_messages": 1},
    {"producer_id": U64, "sequence_id": U64, "num_messages": (1 << 31) - 1, "highest_sequence_id": U64},
    {"producer_id": 3, "sequence_id": 9, "highest_sequence_id": 12},
    {"producer_id": 3, "sequence_id": 9, "num_messages": 0},
])
def test_common_sends_decode_like_protobuf(fields: dict[str, int]) -> None:
    data = send_bytes(**fields)
    fast = decode_send_command(data)
    assert fast is not None
    assert as_tuple(fast) == as_tuple(SendCommand.from_pb(T.FromString(data).send))


@pytest.mark.parametrize("fields", [
    {"producer_id": 1, "sequence_id": 2, "num_messages": -1},  # negative int32: ten-byte varint
    {"producer_id": 1, "sequence_id": 2, "txnid_least_bits": 5},
    {"producer_id": 1, "sequence_id": 2, "txnid_most_bits": 5},
    {"producer_id": 1, "sequence_id": 2, "is_chunk": True},
    {"producer_id": 1, "sequence_id": 2, "marker": True},
])
def test_uncommon_sends_take_the_protobuf_path(fields: dict[str, int]) -> None:
    assert decode_send_command(send_bytes(**fields)) is None


def test_other_shapes_take_the_protobuf_path() -> None:
    cmd = pb.BaseCommand(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 1, 2
    cmd.send.message_id.ledgerId, cmd.send.message_id.entryId = 3, 4
    assert decode_send_command(cmd.SerializeToString()) is None
    assert decode_send_command(CLIENT_SEND + b"\x08\x06") is None  # trailing field
    assert decode_send_command(CLIENT_SEND[:-1]) is None  # cut off
    assert decode_send_command(bytes.fromhex("0806320308001080")) is None  # unfinished varint
    assert decode_send_command(pb.BaseCommand(type=T.PING).SerializeToString()) is None
    assert decode_send_command(b"") is None


def test_random_bytes_never_disagree_with_protobuf() -> None:
    rnd = random.Random(13)
    seeds = [CLIENT_SEND, send_bytes(producer_id=300, sequence_id=1 << 50, num_messages=1, highest_sequence_id=9)]
    for _ in range(20_000):
        data = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(1, 3)):
            op = rnd.randrange(3)
            if op == 0 and data:
                data[rnd.randrange(len(data))] = rnd.randrange(256)
            elif op == 1:
                data.insert(rnd.randrange(len(data) + 1), rnd.randrange(256))
            elif data:
                del data[rnd.randrange(len(data))]
        raw = bytes(data)
        fast = decode_send_command(raw)
        if fast is None:
            continue
        cmd = T.FromString(raw)  # whatever the fast path accepts protobuf parses ...
        assert cmd.type == T.SEND
        assert as_tuple(fast) == as_tuple(SendCommand.from_pb(cmd.send)), raw.hex()  # ... to the same


# ---------------------------------------------------------------- frames


def test_a_common_send_frame_parses_its_command_only_when_asked() -> None:
    dec = FrameDecoder()
    dec.feed(encode_payload_command(T.FromString(CLIENT_SEND), CLIENT_HP))
    frame = dec.next_frame()
    assert frame is not None and frame.type == T.SEND
    assert frame._command is None  # no protobuf object built
    assert frame.send is not None and as_tuple(frame.send) == (0, 2, None, None)
    assert frame.command.send.sequence_id == 2 and frame.command.type == T.SEND
    assert frame.headers_and_payload == CLIENT_HP


def test_an_uncommon_send_frame_carries_its_fields_too() -> None:
    cmd = pb.BaseCommand(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id, cmd.send.txnid_least_bits = 4, 5, 6
    dec = FrameDecoder()
    dec.feed(encode_payload_command(cmd, CLIENT_HP))
    frame = dec.next_frame()
    assert frame is not None and frame._command is not None
    assert frame.send is not None and as_tuple(frame.send) == (4, 5, None, None)


def test_a_malformed_send_command_still_poisons_the_decoder() -> None:
    """Bytes the fast path refuses reach protobuf, which refuses them as before."""
    dec = FrameDecoder()
    body = bytes.fromhex("0806320a0800")  # send claims 10 bytes, has 2
    dec.feed((len(body) + 4).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body)
    with pytest.raises(MalformedFrame):
        dec.next_frame()
