"""decode_ack (compiled, letterbox.protocol._consumer_codec) and its pure-Python reference
(ack_decoder.decode_ack_py) read the common CommandAck shape exactly as protobuf does, or both
give None (the broker then parses with protobuf, which raises for bad bytes as before)."""
from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from letterbox.protocol import FrameDecoder, ack_decoder, pb
from letterbox.protocol import _consumer_codec as cc
from letterbox.protocol.ack_decoder import AckFields, decode_ack_py
from letterbox.protocol.receipts import varint
from tests.protocol.leaks import bytes_left_behind

U64 = (1 << 64) - 1
T = pb.BaseCommand

# BaseCommands of ACKs sent by the official pulsar-client 3.x (C++ core), captured at the broker
CLIENT_ACKS = [bytes.fromhex(h) for h in (
    # individual acks of 27 whole entries (grouped by the client), ledger 1
    "080a52a001080010001a04080110001a04080110011a04080110021a04080110041a04080110051a04080110061a0408"
    "0110071a04080110081a04080110091a040801100b1a040801100c1a040801100d1a040801100e1a040801100f1a0408"
    "0110101a04080110121a04080110131a04080110141a04080110151a04080110161a04080110171a04080110191a0408"
    "01101a1a040801101b1a040801101c1a040801101d",
    # a cumulative ack, ledger 2 entry 19
    "080a520a080110011a0408021013",
    # batch-index acks (batch_index_ack_enabled): ids with ack sets, repeated as the client sends them
    "080a52f701080010001a07080110002892011a07080110002892011a07080110002892011a07080110002892011a0708"
    "0110002892011a07080110002892011a07080110002892011a070801100128c9041a070801100128c9041a0708011001"
    "28c9041a070801100128c9041a070801100128c9041a070801100128c9041a070801100228a4021a070801100228a402"
    "1a070801100228a4021a070801100228a4021a070801100228a4021a070801100228a4021a070801100228a4021a0708"
    "0110032892011a07080110032892011a07080110032892011a07080110032892011a07080110032892011a0708011003"
    "2892011a0708011003289201",
    # a cumulative ack of a batch's part (ack set)
    "080a520d080110011a070802100128e007",
)]


def ack(consumer_id: int = 1, ack_type: int = 0, ids: list[pb.MessageIdData] | None = None,
        **extra: object) -> bytes:
    body = pb.CommandAck(consumer_id=consumer_id, ack_type=ack_type, message_id=ids or [], **extra)  # type: ignore[arg-type]
    return T(type=T.ACK, ack=body).SerializeToString()


def mid(ledger: int, entry: int, **extra: object) -> pb.MessageIdData:
    return pb.MessageIdData(ledgerId=ledger, entryId=entry, **extra)  # type: ignore[arg-type]


SHAPES = [
    ack(),
    ack(7, 1, [mid(3, 9)]),
    ack(U64, 0, [mid(U64, U64), mid(U64, 0)], request_id=U64),
    ack(2, 0, [mid(5, i) for i in range(50)], request_id=0),
    ack(2, 0, [mid(5, 1, ack_set=[-1, 0, 2**63 - 1, -(2**63)]), mid(5, 2), mid(5, 3, ack_set=[6])]),
    ack(2, 1, [mid(5, 1, partition=3, batch_index=4, batch_size=10, ack_set=[0x1F0])]),
    ack(2, 0, [mid(5, 1, partition=-1, batch_index=-1, batch_size=-5)]),
    ack(300, 0, [mid(2**40, 2**35 + i) for i in range(5)], request_id=2**20),
]
# shapes protobuf reads but the decoder leaves to it (None from both)
UNCOMMON = [
    ack(1, 0, [mid(5, 1), mid(6, 2)]),  # ids of two ledgers
    ack(1, 0, [mid(5, 1)], properties=[pb.KeyLongValue(key="k", value=1)]),
    ack(1, 0, [mid(5, 1)], txnid_least_bits=1, txnid_most_bits=2),
    ack(1, 0, [mid(5, 1)], validation_error=pb.CommandAck.ChecksumMismatch),
    ack(1, 0, [mid(5, 1, first_chunk_message_id=mid(5, 0))]),
    T(type=T.ACK).SerializeToString(),  # no ack sub-message
    T(type=T.ACK, ack=pb.CommandAck(consumer_id=1, ack_type=0), flow=pb.CommandFlow(consumer_id=1, messagePermits=2)).SerializeToString(),
    bytes.fromhex("080a5204") + bytes.fromhex("08011002"),  # ack_type 2: not a known value
    bytes.fromhex("080a5206") + bytes.fromhex("080108011000"),  # consumer_id twice
    bytes.fromhex("080a5204") + bytes.fromhex("10000801")[:2] + b"\x40\x05",  # no consumer_id
    bytes.fromhex("080a520b") + bytes.fromhex("080110001a052a0301ff01"),  # packed ack_set... malformed
    bytes.fromhex("080a520a") + bytes.fromhex("080110001a04080110") + b"\x80",  # cut varint
    bytes.fromhex("080a520c") + bytes.fromhex("080110001a060801") + b"\x10\x05\x10\x06",  # entryId twice
    bytes.fromhex("080a52") + b"\x81\x00" + bytes.fromhex("08011000"),  # padded length: leave it to protobuf
    bytes.fromhex("0a0a5204") + bytes.fromhex("08011000"),  # not an ACK type tag
]


def from_protobuf(raw: bytes) -> AckFields | None:
    """What handle_ack reads from protobuf's parse of the same bytes (None: DecodeError)."""
    try:
        cmd = T.FromString(raw)
    except DecodeError:
        return None
    assert cmd.type == T.ACK
    a = cmd.ack
    plain: list[int] = []
    items: list[tuple[int, list[int]]] = []
    ledgers = set()
    for m in a.message_id:
        ledgers.add(m.ledgerId)
        if m.ack_set:
            items.append((m.entryId, list(m.ack_set)))
        else:
            plain.append(m.entryId)
    assert len(ledgers) <= 1
    return (a.consumer_id, a.ack_type, a.request_id if a.HasField("request_id") else None,
            ledgers.pop() if ledgers else None, plain, items)


def check(raw: bytes) -> AckFields | None:
    """C and Python agree; when they decode, protobuf parses the bytes to the same values."""
    got = cc.decode_ack(raw)
    assert got == decode_ack_py(raw), raw.hex()
    if got is not None:
        assert got == from_protobuf(raw), raw.hex()
    return got


@pytest.mark.parametrize("raw", CLIENT_ACKS + SHAPES)
def test_common_shapes_decode_as_protobuf(raw: bytes) -> None:
    assert check(raw) is not None


def test_client_acks_read_as_expected() -> None:
    plain = check(CLIENT_ACKS[0])
    assert plain is not None and plain[:4] == (0, 0, None, 1) and plain[4][:3] == [0, 1, 2] and plain[5] == []
    assert check(CLIENT_ACKS[1]) == (1, 1, None, 2, [19], [])
    batched = check(CLIENT_ACKS[2])
    assert batched is not None and batched[4] == [] and batched[5][0] == (0, [146]) and len(batched[5]) == 27
    assert check(CLIENT_ACKS[3]) == (1, 1, None, 2, [], [(1, [992])])


@pytest.mark.parametrize("raw", UNCOMMON)
def test_uncommon_shapes_are_left_to_protobuf(raw: bytes) -> None:
    assert cc.decode_ack(raw) is None
    assert decode_ack_py(raw) is None


def mutate_bytes(rng: random.Random, raw: bytes) -> bytes:
    b = bytearray(raw)
    for _ in range(rng.choice((1, 1, 1, 1, 2, 3))):
        op = rng.randrange(8)
        pos = rng.randrange(len(b) + 1)
        if op >= 6 and b:  # another byte of the same varint class: a value (or tag) changes, lengths hold
            at = min(pos, len(b) - 1)
            b[at] = rng.randrange(0x80) | (b[at] & 0x80)
        elif op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1 and b:  # flip one bit
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 2:
            b.insert(pos, rng.choice((0x00, 0x01, 0x08, 0x10, 0x1A, 0x28, 0x2A, 0x40, 0x80, 0xFF, rng.randrange(256))))
        elif op == 3 and b:
            del b[min(pos, len(b) - 1)]
        elif op == 4:
            del b[pos:]
        elif op == 5 and b:  # repeat a slice
            start = rng.randrange(len(b))
            b[start:start] = b[start:start + rng.randrange(1, 12)]
    return bytes(b)


def mutate(rng: random.Random, raw: bytes) -> bytes:
    """Mutations of the whole command, or of the CommandAck inside it with its length fixed
    (so that what is wrong, if anything, is inside), or of one message id with both lengths fixed."""
    how = rng.randrange(3)
    if how == 0 or raw[:3] != b"\x08\x0a\x52":
        return mutate_bytes(rng, raw)
    pos = 4 if raw[3] < 0x80 else 5
    body = raw[pos:]
    at = rng.choice([i for i in range(2, len(body)) if body[i] == 0x1A] or [-1])
    if how == 2 and at >= 0 and at + 1 < len(body) and body[at + 1] < 0x80:  # one message id: [1a len id]
        n = body[at + 1]
        inner = mutate_bytes(rng, body[at + 2:at + 2 + n])
        body = body[:at] + b"\x1a" + varint(len(inner)) + inner + body[at + 2 + n:]
        return b"\x08\x0a\x52" + varint(len(body)) + body
    body = mutate_bytes(rng, body)
    return b"\x08\x0a\x52" + varint(len(body)) + body


def test_mutated_acks_decode_as_protobuf_or_fall_back() -> None:
    rng = random.Random(1313)
    seeds = CLIENT_ACKS * 4 + SHAPES * 2 + UNCOMMON  # mostly decodable seeds: both outcomes stay frequent
    decoded = fell_back = 0
    for i in range(24_000):
        raw = mutate(rng, seeds[i % len(seeds)])
        if check(raw) is None:
            fell_back += 1
        else:
            decoded += 1
    # both outcomes are exercised, not one of them only
    assert decoded > 1_500 and fell_back > 1_500, (decoded, fell_back)


def test_random_bytes_never_raise() -> None:
    rng = random.Random(99)
    for _ in range(5_000):
        raw = b"\x08\x0a\x52" + bytes([rng.randrange(40)]) + rng.randbytes(rng.randrange(40))
        check(raw)
    assert cc.decode_ack(b"") is None and cc.decode_ack(b"\x08") is None
    assert cc.decode_ack(bytearray(CLIENT_ACKS[1])) == (1, 1, None, 2, [19], [])
    with pytest.raises(TypeError):
        cc.decode_ack("text")  # type: ignore[arg-type]


def test_decode_ack_leaks_nothing() -> None:
    """Decoded, fallen back and refused: 20,000 rounds leave no memory behind (refcounts right)."""
    cut = CLIENT_ACKS[2][:-3]

    def run() -> None:
        for _ in range(20_000):
            cc.decode_ack(CLIENT_ACKS[2])
            cc.decode_ack(SHAPES[4])
            cc.decode_ack(UNCOMMON[0])
            cc.decode_ack(cut)
            with pytest.raises(TypeError):
                cc.decode_ack(5)  # type: ignore[arg-type]

    grown = bytes_left_behind(run)
    assert grown < 64 * 1024, f"{grown} bytes left behind by 100,000 calls"


@pytest.mark.parametrize("raw", [CLIENT_ACKS[1], CLIENT_ACKS[2], UNCOMMON[0], UNCOMMON[1]])
def test_frame_decoder_hands_acks_over_decoded(raw: bytes) -> None:
    """FrameDecoder gives an ACK of the common shape its decoded fields (with the compiled codec),
    any other its protobuf parse; `command` is protobuf's parse either way."""
    dec = FrameDecoder()
    dec.feed((len(raw) + 4).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw)
    frame = dec.next_frame()
    assert frame is not None and frame.type == T.ACK
    expected = cc.decode_ack(raw) if ack_decoder.decode_ack is not None else None
    assert frame.ack == expected
    assert (frame.ack is not None) == (raw in CLIENT_ACKS and ack_decoder.decode_ack is not None)
    assert frame.command == T.FromString(raw)
