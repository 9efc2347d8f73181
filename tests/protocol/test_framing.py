"""Frame encoding/decoding, payload headers and the incremental decoder."""
from __future__ import annotations

import random
import struct

import pytest
from crc32c import crc32c

from letterbox.protocol import (
    MAGIC_CRC32C,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    ProtocolError,
    UnknownCommand,
    build_headers_and_payload,
    client_commands,
    commands,
    encode_command,
    encode_payload_command,
    parse_entry_metadata,
    parse_headers_and_payload,
    parse_send_payload,
    pb,
)

T = pb.BaseCommand


def _meta(seq: int = 7) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1234)


def _decode_all(data: bytes) -> list[Frame]:
    d = FrameDecoder()
    d.feed(data)
    out: list[Frame] = []
    while (f := d.next_frame()) is not None:
        out.append(f)
    return out


def test_simple_frame_layout() -> None:
    raw = encode_command(T(type=T.PING, ping=pb.CommandPing()))
    total, cmd_size = struct.unpack(">II", raw[:8])
    assert total == len(raw) - 4
    assert cmd_size == len(raw) - 8
    [frame] = _decode_all(raw)
    assert frame.command.type == T.PING
    assert frame.headers_and_payload is None


def test_headers_and_payload_layout_and_checksum() -> None:
    meta = _meta()
    hp = build_headers_and_payload(meta, b"hello")
    assert struct.unpack(">H", hp[:2])[0] == MAGIC_CRC32C
    (crc,) = struct.unpack(">I", hp[2:6])
    assert crc == crc32c(hp[6:])
    meta_bytes = meta.SerializeToString()
    assert hp[6:10] == struct.pack(">I", len(meta_bytes))
    assert hp[10:] == meta_bytes + b"hello"
    assert build_headers_and_payload(meta_bytes, b"hello") == hp


def test_payload_frame_round_trip() -> None:
    hp = build_headers_and_payload(_meta(42), b"payload-bytes")
    raw = client_commands.send(1, 42, 1, hp)
    [frame] = _decode_all(raw)
    assert frame.command.type == T.SEND
    assert frame.command.send.sequence_id == 42
    assert frame.headers_and_payload == hp  # opaque, byte for byte
    parsed = parse_headers_and_payload(frame.headers_and_payload)
    assert parsed.checksum_ok
    assert parsed.metadata.sequence_id == 42
    assert parsed.metadata_bytes == _meta(42).SerializeToString()
    assert parsed.payload == b"payload-bytes"
    assert parsed.broker_entry_metadata is None


def test_encode_payload_command_is_concatenation() -> None:
    hp = b"\x0e\x01anything-goes-here"
    cmd = T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=2))
    raw = encode_payload_command(cmd, hp)
    assert raw.endswith(hp)
    assert raw[8 : len(raw) - len(hp)] == cmd.SerializeToString()
    assert struct.unpack(">I", raw[:4])[0] == len(raw) - 4


def test_parse_entry_metadata() -> None:
    hp = build_headers_and_payload(_meta(5), b"body")
    assert parse_entry_metadata(hp).sequence_id == 5
    bem = pb.BrokerEntryMetadata(index=1).SerializeToString()
    prefixed = b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + hp
    assert parse_entry_metadata(prefixed).sequence_id == 5
    with pytest.raises(MalformedFrame):
        parse_entry_metadata(hp[:8])


def test_bad_checksum_detected() -> None:
    hp = bytearray(build_headers_and_payload(_meta(), b"hello"))
    hp[-1] ^= 0xFF
    parsed = parse_headers_and_payload(bytes(hp))
    assert not parsed.checksum_ok
    assert parsed.payload[:-1] == b"hell"


def test_payload_without_checksum_is_accepted() -> None:
    meta_bytes = _meta().SerializeToString()
    hp = struct.pack(">I", len(meta_bytes)) + meta_bytes + b"x"
    parsed = parse_headers_and_payload(memoryview(hp))
    assert parsed.checksum_ok
    assert parsed.payload == b"x"


def test_broker_entry_metadata_prefix() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=99, index=5).SerializeToString()
    hp = build_headers_and_payload(_meta(), b"p")
    parsed = parse_headers_and_payload(b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + hp)
    assert parsed.checksum_ok
    assert parsed.broker_entry_metadata is not None
    assert parsed.broker_entry_metadata.index == 5
    assert parsed.payload == b"p"


@pytest.mark.parametrize("cut", [0, 1, 3, 5, 8, 11])
def test_truncated_headers_raise(cut: int) -> None:
    hp = build_headers_and_payload(_meta(), b"")
    with pytest.raises(MalformedFrame):
        parse_headers_and_payload(hp[:cut])


def test_garbage_metadata_raises() -> None:
    with pytest.raises(MalformedFrame):
        parse_headers_and_payload(struct.pack(">I", 3) + b"\xff\xff\xff")


def _mixed_stream() -> tuple[bytes, int]:
    parts = [client_commands.connect("test", 21)]
    for i in range(50):
        parts.append(commands.ping())
        parts.append(client_commands.send(1, i, 1, build_headers_and_payload(_meta(i), b"m" * i)))
    return b"".join(parts), len(parts)


def test_byte_by_byte() -> None:
    data, count = _mixed_stream()
    d = FrameDecoder()
    frames = []
    for i in range(len(data)):
        d.feed(data[i : i + 1])
        while (f := d.next_frame()) is not None:
            frames.append(f)
    assert len(frames) == count
    assert d.buffered == 0
    sends = [f for f in frames if f.command.type == T.SEND]
    assert [f.command.send.sequence_id for f in sends] == list(range(50))
    hp = sends[7].headers_and_payload
    assert hp is not None and parse_headers_and_payload(hp).payload == b"m" * 7


def test_any_chunking_gives_the_same_frames_through_runs_and_single_frames() -> None:
    """Bytes read in place, incomplete frames carried over, runs of SENDs taken whole
    (take_sends) or frame by frame: every chunking gives the same 100 frames; a bytearray
    changed after it was fed changes nothing."""
    data, count = _mixed_stream()
    rnd = random.Random(3)
    for _ in range(40):
        d = FrameDecoder()
        seqs: list[int] = []
        pings = pos = 0
        while pos < len(data):
            n = rnd.randint(1, 400)
            chunk = bytearray(data[pos : pos + n]) if rnd.random() < 0.3 else data[pos : pos + n]
            d.feed(chunk)  # type: ignore[arg-type]  # callers may pass any bytes-like
            if isinstance(chunk, bytearray):
                chunk[:] = b"\xff" * len(chunk)
            pos += n
            while True:
                seqs += [send[1] for send in d.take_sends()]
                f = d.next_frame()
                if f is None:
                    break
                if f.type == T.SEND:
                    assert f.send is not None
                    seqs.append(f.send.sequence_id)
                else:
                    pings += 1
        assert seqs == list(range(50)) and pings == count - 50 and d.buffered == 0


def test_pipelined_in_one_feed() -> None:
    data, count = _mixed_stream()
    assert len(_decode_all(data)) == count


def test_truncated_frame_waits_for_rest() -> None:
    raw = client_commands.flow(3, 1000)
    d = FrameDecoder()
    d.feed(raw[:-1])
    assert d.next_frame() is None
    assert d.next_frame() is None
    d.feed(raw[-1:])
    frame = d.next_frame()
    assert frame is not None and frame.command.flow.messagePermits == 1000


def test_frame_too_large_from_header_alone() -> None:
    d = FrameDecoder()
    d.feed(struct.pack(">I", 2 * 1024 * 1024 * 1024))
    with pytest.raises(FrameTooLarge) as info:
        d.next_frame()
    assert info.value.size == 2 * 1024 * 1024 * 1024
    with pytest.raises(FrameTooLarge):  # poisoned
        d.next_frame()
    with pytest.raises(ProtocolError):
        d.feed(b"more")


def test_custom_max_frame_size() -> None:
    d = FrameDecoder(max_frame_size=16)
    d.feed(struct.pack(">I", 17))
    with pytest.raises(FrameTooLarge):
        d.next_frame()


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">II", 8, 100) + b"\x00" * 4,  # command size > total size
        struct.pack(">II", 8, 4) + b"\xff\xff\xff\xff",  # unparseable command
        struct.pack(">II", 4, 0),  # empty command: no type
        struct.pack(">I", 2) + b"\x00\x00",  # total smaller than cmd size field
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # wrong protocol entirely
    ],
)
def test_garbage_is_malformed_and_poisons(data: bytes) -> None:
    d = FrameDecoder()
    d.feed(data)
    with pytest.raises((MalformedFrame, FrameTooLarge)):
        d.next_frame()
    with pytest.raises(ProtocolError):
        d.next_frame()


def test_unknown_command_type() -> None:
    body = b"\x08\xe7\x07"  # field 1 varint = 999
    raw = struct.pack(">II", len(body) + 4, len(body)) + body
    d = FrameDecoder()
    d.feed(raw + commands.ping())
    with pytest.raises(UnknownCommand) as info:
        d.next_frame()
    assert info.value.type_number == 999
    assert isinstance(info.value, ProtocolError)
    frame = d.next_frame()  # framing intact: the decoder continues
    assert frame is not None and frame.command.type == T.PING


def test_decoder_splits_a_long_stream_fed_in_large_chunks() -> None:
    """50,000 frames fed 500 at a time come out one by one, none lost or merged (speed is
    measured in benchmarks/, never asserted here)."""
    frame = client_commands.flow(1, 100)
    n = 50_000
    d = FrameDecoder()
    for chunk_start in range(0, n, 500):
        d.feed(frame * 500)
        got = 0
        while (f := d.next_frame()) is not None:
            assert f.command.flow.messagePermits == 100, chunk_start
            got += 1
        assert got == 500, chunk_start


def _send_payloads() -> list[bytes]:
    hp = build_headers_and_payload(_meta(), b"hello")
    meta_bytes = _meta().SerializeToString()
    bad_crc = bytearray(hp)
    bad_crc[-1] ^= 0xFF
    bem = pb.BrokerEntryMetadata(index=5).SerializeToString()
    return [
        hp,
        build_headers_and_payload(_meta(), b""),
        struct.pack(">I", len(meta_bytes)) + meta_bytes + b"x",  # no checksum
        bytes(bad_crc),
        b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + hp,
        hp[:4],  # truncated checksum
        hp[:8],  # truncated metadata size
        hp[:12],  # metadata overruns
        hp[:6] + struct.pack(">I", 3) + b"\xff\xff\xff",  # unparsable metadata
        b"\x0e\x02\x00",
    ]


@pytest.mark.parametrize("hp", _send_payloads())
def test_parse_send_payload_agrees_with_parse_headers_and_payload(hp: bytes) -> None:
    """The SEND path's copy-free parse reads every payload as the general parser does."""
    try:
        expected = parse_headers_and_payload(hp)
    except MalformedFrame as exc:
        with pytest.raises(MalformedFrame) as got:
            parse_send_payload(hp)
        assert str(got.value) == str(exc)
        return
    meta, payload, checksum_ok = parse_send_payload(hp)
    assert meta == expected.metadata
    assert bytes(payload) == expected.payload
    assert checksum_ok == expected.checksum_ok
