"""The compiled SEND reader (_send_codec.decode_send) against its pure-Python reference
(protocol/send_scan.py, built on the protobuf path): on the official client's bytes, on
batches, on uncommon and broken messages and on mutated frames, C either gives exactly
what the reference gives or gives no facts (the broker then takes the protobuf path)."""
from __future__ import annotations

import contextlib
import os
import random
import struct

import crc32c
import pytest

from letterbox.protocol import _send_codec, pb, send_scan
from letterbox.protocol.batch import build_batch_payload
from letterbox.protocol.connection import ServerProtocol
from letterbox.protocol.framing import (
    FrameDecoder,
    ProtocolError,
    build_headers_and_payload,
    encode_command,
)
from letterbox.protocol.speedups import send_codec

T = pb.BaseCommand
# what the official client (pulsar-client 3.13, batching off) sends, captured
CLIENT_SEND = bytes.fromhex("0806320408001002")
CLIENT_HP = bytes.fromhex(
    "0e012956da31000000200a157374616e64616c6f6e652d7479366d746578652d30100218adb1b7daa034") + b"x" * 100


def send_cmd(**fields: int) -> bytes:
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 3, 9
    for k, v in fields.items():
        setattr(cmd.send, k, v)
    return cmd.SerializeToString()


def meta(**fields: object) -> pb.MessageMetadata:
    m = pb.MessageMetadata(producer_name="prod-1", sequence_id=9, publish_time=1_795_485_980_845)
    for k, v in fields.items():
        if k == "properties":
            m.properties.add(key="k", value="v")
        else:
            setattr(m, k, v)
    return m


def batch(n: int) -> bytes:
    entries = []
    for i in range(n):
        s = pb.SingleMessageMetadata(partition_key=f"key-{i}", event_time=i, sequence_id=i)
        s.properties.add(key="a", value=str(i))
        entries.append((s, b"m" * (i * 7 + 1)))
    return build_batch_payload(entries)


def frame(cmd: bytes, hp: bytes) -> bytes:
    return struct.pack(">II", 4 + len(cmd) + len(hp), len(cmd)) + cmd + hp


def both(cmd: bytes, hp: bytes) -> tuple[object, object]:
    buf = bytearray(frame(cmd, hp))
    args = (8, 8 + len(cmd), len(buf))
    return _send_codec.decode_send(buf, *args), send_scan.decode_send(buf, *args)


def agree(c: object, ref: object) -> bool:
    """C gave what the reference gave, or less: no answer, or no facts."""
    if c is None:
        return True
    assert isinstance(c, tuple) and isinstance(ref, tuple)
    return c[:6] == ref[:6] and (c[6] is None or c[6] == ref[6])


BATCH3 = build_headers_and_payload(meta(num_messages_in_batch=3, uncompressed_size=len(batch(3))), batch(3))
COMMON = [
    (CLIENT_SEND, CLIENT_HP),
    (send_cmd(num_messages=1, highest_sequence_id=12), build_headers_and_payload(
        meta(properties=True, partition_key="pk", ordering_key=b"ok", event_time=5, deliver_at_time=1 << 41,
             uncompressed_size=3, schema_version=b"\x00\x01", replicated_from="x", uuid="u"), b"abc")),
    (send_cmd(num_messages=3), BATCH3),
    (send_cmd(), build_headers_and_payload(meta(num_messages_in_batch=1), batch(1))),
    (send_cmd(), meta().SerializeToString().join([struct.pack(">I", len(meta().SerializeToString())), b"p"])),
]


@pytest.mark.parametrize(("cmd", "hp"), COMMON)
def test_common_sends_get_the_references_facts(cmd: bytes, hp: bytes) -> None:
    c, ref = both(cmd, hp)
    assert c is not None and c[6] is not None
    assert c == ref


def test_the_official_clients_send() -> None:
    c, _ = both(CLIENT_SEND, CLIENT_HP)
    assert c == (0, 2, None, None, CLIENT_SEND, CLIENT_HP, (1, 1795485980845, None, 100))


def test_a_batch_counts_its_entries() -> None:
    c, _ = both(send_cmd(num_messages=3), BATCH3)
    assert c is not None and c[6] is not None and c[6][0] == 3


UNCOMMON = {
    "bad checksum": (CLIENT_SEND, CLIENT_HP[:-1] + b"y"),
    "compressed": (send_cmd(), build_headers_and_payload(meta(compression=pb.CompressionType.LZ4), b"x")),
    "encrypted": (send_cmd(), build_headers_and_payload(meta(encryption_algo="a"), b"x")),
    "chunk": (send_cmd(), build_headers_and_payload(meta(chunk_id=0, num_chunks_from_msg=2), b"x")),
    "marker": (send_cmd(), build_headers_and_payload(meta(marker_type=1), b"x")),
    "transaction": (send_cmd(), build_headers_and_payload(meta(txnid_least_bits=1), b"x")),
    "broker entry metadata": (send_cmd(), b"\x0e\x02\x00\x00\x00\x00" + CLIENT_HP),
    "num_messages 2, no batch": (send_cmd(num_messages=2), CLIENT_HP),
    "num_messages 0": (send_cmd(num_messages=0), CLIENT_HP),
    "batch count mismatch": (send_cmd(num_messages=2), BATCH3),
    "batch too short": (send_cmd(), build_headers_and_payload(meta(num_messages_in_batch=4), batch(3))),
    "batch trailing bytes": (send_cmd(), build_headers_and_payload(meta(num_messages_in_batch=3), batch(3) + b"z")),
    "uncompressed_size above the payload": (send_cmd(), build_headers_and_payload(meta(uncompressed_size=9), b"x")),
    "no publish_time": (send_cmd(), build_headers_and_payload(
        pb.MessageMetadata(producer_name="p", sequence_id=1).SerializePartialToString(), b"x")),
    "property without value": (send_cmd(), build_headers_and_payload(
        meta().SerializeToString() + b"\x22\x03\x0a\x01k", b"x")),
    "unknown field": (send_cmd(), build_headers_and_payload(meta().SerializeToString() + b"\xf8\x01\x01", b"x")),
    "publish_time as bytes": (send_cmd(), build_headers_and_payload(meta().SerializeToString() + b"\x1a\x00", b"x")),
    "padded varint": (send_cmd(), build_headers_and_payload(meta().SerializeToString() + b"\x60\x80\x00", b"x")),
    "metadata size overrun": (send_cmd(), b"\x00\x00\x01\x00" + meta().SerializeToString()),
    "no payload at all": (send_cmd(), b""),
}


@pytest.mark.parametrize("case", sorted(UNCOMMON))
def test_uncommon_or_broken_sends_get_no_facts(case: str) -> None:
    cmd, hp = UNCOMMON[case]
    c, ref = both(cmd, hp)
    assert c is None or c[6] is None
    assert agree(c, ref)


def test_other_commands_are_not_read() -> None:
    for cmd in (T(type=T.PING).SerializeToString(), CLIENT_SEND + b"\x08\x06", CLIENT_SEND[:-1]):
        c, ref = both(cmd, CLIENT_HP)
        assert c is None and ref is None


def test_bounds_are_checked() -> None:
    buf = frame(CLIENT_SEND, CLIENT_HP)
    for args in ((8, 16, len(buf) + 1), (-1, 16, len(buf)), (9, 8, len(buf))):
        with pytest.raises(ValueError):
            _send_codec.decode_send(buf, *args)
        with pytest.raises(ValueError):
            send_scan.decode_send(buf, *args)


def test_crc32c_equals_the_crc32c_package() -> None:
    rnd = random.Random(7)
    for n in [*range(40), 100, 1000, 12_287, 12_288, 12_289, 65_537, 200_003]:  # 12,288: one three-lane step
        data = rnd.randbytes(n)
        assert _send_codec.crc32c(data) == _send_codec.crc32c(data, False) == crc32c.crc32c(data)


def mutate(rnd: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(3)
        if op == 0 and out:
            out[rnd.randrange(len(out))] = rnd.randrange(256)
        elif op == 1:
            out.insert(rnd.randrange(len(out) + 1), rnd.randrange(256))
        elif out:
            del out[rnd.randrange(len(out))]
    return bytes(out)


def test_mutated_frames_never_disagree_with_the_reference() -> None:
    rnd = random.Random(13)
    seeds = [*COMMON * 8, *UNCOMMON.values()]  # mostly common shapes: C must read their mutations
    facts = fallbacks = 0
    for i in range(24_000):
        cmd, hp = rnd.choice(seeds)
        where = i % 4
        if where == 0:
            cmd = mutate(rnd, cmd)
        elif where < 3:  # the message, with a checksum that matches the mutation
            checked = hp[6:] if hp[:2] == b"\x0e\x01" else hp
            hp = mutate(rnd, checked)
            if rnd.random() < 0.7:
                hp = b"\x0e\x01" + struct.pack(">I", crc32c.crc32c(hp)) + hp
        else:
            hp = mutate(rnd, hp)
        c, ref = both(cmd, hp)
        assert agree(c, ref), (cmd.hex(), hp.hex())
        if c is not None and c[6] is not None:
            facts += 1
        else:
            fallbacks += 1
    assert facts > 1_000 and fallbacks > 1_000  # both outcomes were exercised


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out) + bytes([v])


def random_field(rnd: random.Random) -> bytes:
    """A field of MessageMetadata's numbers (known, refused or unknown) with any wire type."""
    field, wire = rnd.choice([1, 2, 3, 4, 8, 9, 11, 12, 13, 19, 20, 27, 29, 31]), rnd.choice([0, 0, 2, 2, 1, 5])
    tag = varint(field << 3 | wire)
    if wire == 0:
        return tag + varint(rnd.choice([0, 1, 2, 2**31 - 1, 2**31, 2**32, 2**63, 2**64 - 1, rnd.getrandbits(64)]))
    if wire == 2:
        body = rnd.choice([b"", b"ab", b"\x0a\x01k\x12\x01v", b"\x0a\x01k", b"\x12\x01v", rnd.randbytes(3)])
        return tag + varint(len(body)) + body
    return tag + rnd.randbytes(8 if wire == 1 else 4)


def test_metadata_with_random_fields_never_disagrees_with_the_reference() -> None:
    rnd = random.Random(15)
    facts = 0
    for _ in range(6_000):
        cmd, hp = rnd.choice(COMMON)
        checked = hp[6:] if hp[:2] == b"\x0e\x01" else hp
        (size,) = struct.unpack_from(">I", checked)
        meta, payload = checked[4 : 4 + size], checked[4 + size :]
        for _ in range(rnd.choice([1, 1, 1, 2, 3])):
            at = rnd.randrange(len(meta) + 1)
            meta = meta[:at] + random_field(rnd) + meta[at:]
        c, ref = both(cmd, build_headers_and_payload(meta, payload))
        assert agree(c, ref), (cmd.hex(), meta.hex())
        facts += c is not None and c[6] is not None
    assert facts > 100  # fields C reads (e.g. a property, a varint it takes) were inserted too


def test_the_decoder_hands_the_facts_to_the_frame() -> None:
    dec = FrameDecoder()
    dec.feed(frame(CLIENT_SEND, CLIENT_HP) + frame(send_cmd(num_messages=3), BATCH3))
    first, second = dec.next_frame(), dec.next_frame()
    assert first is not None and second is not None and dec.next_frame() is None
    assert first.headers_and_payload == CLIENT_HP and second.headers_and_payload == BATCH3
    assert first.send is not None and first.send.sequence_id == 2
    if send_codec is None:  # LETTERBOX_PURE_PYTHON=1: the protobuf path decides in handle_send
        assert first.facts is None and second.facts is None
    else:
        assert first.facts == (1, 1795485980845, None, 100)
        assert second.facts is not None and second.facts[0] == 3
    assert first.command.send.sequence_id == 2  # parsed from the kept bytes when asked


def test_split_sends_takes_the_run_of_common_sends_only() -> None:
    ping = T(type=T.PING).SerializeToString()
    run = [frame(CLIENT_SEND, CLIENT_HP), frame(send_cmd(num_messages=3), BATCH3), frame(*UNCOMMON["bad checksum"])]
    buf = bytearray(b"".join(run) + struct.pack(">II", 4 + len(ping), len(ping)) + ping + frame(CLIENT_SEND, CLIENT_HP))
    c_items, c_pos = _send_codec.split_sends(buf, 0, 1 << 20)
    assert (c_items, c_pos) == send_scan.split_sends(buf, 0, 1 << 20)
    assert len(c_items) == 3 and c_pos == sum(map(len, run))  # stops at the PING
    assert [item[6] is not None for item in c_items] == [True, True, False]
    assert _send_codec.split_sends(buf, 0, len(run[0]) - 5) == ([], 0)  # too large: the decoder refuses it
    assert _send_codec.split_sends(buf[:-1], c_pos + 12, 1 << 20) == ([], c_pos + 12)


def test_mutated_streams_split_like_the_reference() -> None:
    rnd = random.Random(14)
    parts = [frame(cmd, hp) for cmd, hp in COMMON] + [frame(CLIENT_SEND, b""), frame(T(type=T.PING).SerializeToString(), b"")]
    for _ in range(4_000):
        buf = bytearray(mutate(rnd, b"".join(rnd.choice(parts) for _ in range(4))))
        pos = rnd.choice([0, 0, rnd.randrange(len(buf) + 1)])
        limit = rnd.choice([1 << 20, 200])
        c_items, c_pos = _send_codec.split_sends(buf, pos, limit)
        r_items, r_pos = send_scan.split_sends(buf, pos, limit)
        assert len(c_items) <= len(r_items) and all(agree(c, r) for c, r in zip(c_items, r_items, strict=False))
        k = len(c_items)
        if k == len(r_items):
            assert c_pos == r_pos, buf.hex()
        else:  # C stopped early only at a frame whose command it does not read
            cmd, hp = r_items[k][4], r_items[k][5]
            start = c_pos + 8
            assert _send_codec.decode_send(buf, start, start + len(cmd), start + len(cmd) + len(hp)) is None


def test_the_protocol_hands_out_sends_only_once_connected() -> None:
    proto = ServerProtocol()
    proto.receive_data(frame(CLIENT_SEND, CLIENT_HP))
    assert proto.take_sends() == []
    with pytest.raises(ProtocolError):  # as before: SEND before CONNECT
        proto.next_event()
    proto = ServerProtocol()
    connect = T(type=T.CONNECT)
    connect.connect.client_version = "x"
    proto.receive_data(encode_command(connect) + frame(CLIENT_SEND, CLIENT_HP) * 2)
    assert proto.take_sends() == []
    assert proto.next_event() is not None and proto.connected
    sends = proto.take_sends()
    assert len(sends) == (2 if send_codec is not None else 0)
    assert proto.buffered == (0 if send_codec is not None else 2 * len(frame(CLIENT_SEND, CLIENT_HP)))


def rss_kb() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_a_loop_of_calls_keeps_memory_flat() -> None:
    frames = [bytearray(frame(cmd, hp)) for cmd, hp in COMMON + list(UNCOMMON.values())]
    args = [(f, (8, 8 + f[7], len(f))) for f in frames]  # command sizes here are < 256

    def run(n: int) -> None:
        for i in range(n):
            f, a = args[i % len(args)]
            _send_codec.decode_send(f, *a)
            with contextlib.suppress(ValueError):
                _send_codec.decode_send(f, 0, 1, len(f) + 1)
            _send_codec.split_sends(f + f, 0, 1 << 20)

    run(20_000)
    before = rss_kb()
    run(200_000)
    assert rss_kb() - before < 2_048  # a leaked tuple per call would be ~20 MB
