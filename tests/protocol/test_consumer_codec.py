"""The compiled MESSAGE and SEND_RECEIPT encoders (letterbox.protocol._consumer_codec) write the
bytes of their pure-Python references (receipts.message, receipts.pending_receipts), which
tests/protocol/test_commands.py holds to protobuf's own serialization."""
from __future__ import annotations

import random

import pytest

from letterbox.protocol import _consumer_codec as cc
from letterbox.protocol import receipts
from tests.protocol.leaks import bytes_left_behind

U64 = (1 << 64) - 1
IDS = [0, 1, 127, 128, 300, 16_383, 16_384, 2**21 - 1, 2**21, 2**28, 2**31, 2**32 + 5, 2**56, 2**63, U64]
ACK_SETS: list[list[int] | None] = [None, [], [0], [1, -1], [5], [-(2**63), 2**63 - 1, 2**64 - 1, 12345], [7] * 40]
DATA = [b"", b"x", bytes(range(256)) * 3]


@pytest.mark.parametrize("partition", [-1, 0, 5, 300, 2**31 - 1])
def test_message_frame_is_message(partition: int) -> None:
    for value in IDS:
        for cid, ledger, entry in ((value, 3, value), (1, value, 0), (value, value, value)):
            for redeliveries in (0, 1, 300, 2**32 - 1):
                for ack_set in ACK_SETS:
                    for data in DATA:
                        expected = receipts.message(cid, ledger, entry, partition, redeliveries, ack_set, data)
                        assert cc.message_frame(cid, ledger, entry, partition, redeliveries, ack_set, data) == expected


def test_message_frame_matches_random_values() -> None:
    rng = random.Random(13)
    for _ in range(20_000):
        args = (rng.getrandbits(rng.choice((3, 8, 20, 64))), rng.getrandbits(rng.choice((2, 33, 64))),
                rng.getrandbits(rng.choice((7, 14, 40, 64))), rng.choice((-1, -1, rng.getrandbits(31))),
                rng.choice((0, 0, rng.getrandbits(rng.choice((3, 32))))),
                rng.choice((None, [rng.getrandbits(64) - (1 << 63) for _ in range(rng.randrange(4))])),
                rng.randbytes(rng.randrange(300)))
        assert cc.message_frame(*args) == receipts.message(*args), args


def test_message_frame_takes_tuples_and_buffers() -> None:
    """ack_set may be any sequence of ints, the payload any bytes-like object (as b"".join takes)."""
    expected = receipts.message(1, 2, 3, -1, 0, [1, -2], b"abc")
    assert cc.message_frame(1, 2, 3, -1, 0, (1, -2), b"abc") == expected
    assert cc.message_frame(1, 2, 3, -1, 0, [1, -2], bytearray(b"abc")) == expected
    assert cc.message_frame(1, 2, 3, -1, 0, [1, -2], memoryview(b"zabc")[1:]) == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [((-1, 2, 3, -1, 0, None, b""), OverflowError), ((1, 2**64, 3, -1, 0, None, b""), OverflowError),
     ((1, 2, -3, -1, 0, None, b""), OverflowError), ((1, 2, 3, -1, -1, None, b""), OverflowError),
     ((1, 2, 3, 2**63, 0, None, b""), OverflowError), (("1", 2, 3, -1, 0, None, b""), TypeError),
     ((1, 2, 3, -1, 0, 5, b""), TypeError), ((1, 2, 3, -1, 0, ["a"], b""), TypeError),
     ((1, 2, 3, -1, 0, None, "text"), TypeError), ((1, 2, 3, -1, 0, None), TypeError)],
)
def test_message_frame_refuses_bad_arguments(args: tuple[object, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        cc.message_frame(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize("ledger", [0, 3, 300, 2**40, U64])
@pytest.mark.parametrize("pid", [0, 1, 200, U64])
def test_pending_receipts_are_the_references(pid: int, ledger: int) -> None:
    pending = [(entry, seq, highest, 100) for seq in (0, 5, 2**40, U64) for entry in (0, 127, 128, 2**33, U64)
               for highest in (None, 0, 2**20, U64)]
    assert cc.pending_receipts(pid, ledger, pending) == receipts.pending_receipts(pid, ledger, pending)
    for n in range(1, 4):
        assert cc.pending_receipts(pid, ledger, pending[:n]) == receipts.pending_receipts(pid, ledger, pending[:n])
    assert cc.pending_receipts(pid, ledger, []) == b""


def test_pending_receipts_match_random_values() -> None:
    rng = random.Random(7)
    for _ in range(3_000):
        pending = [(rng.getrandbits(rng.choice((5, 30, 64))), rng.getrandbits(rng.choice((5, 30, 64))),
                    rng.choice((None, rng.getrandbits(rng.choice((5, 64))))), rng.randrange(10**6))
                   for _ in range(rng.randrange(1, 30))]
        pid, ledger = rng.getrandbits(rng.choice((3, 64))), rng.getrandbits(rng.choice((3, 64)))
        assert cc.pending_receipts(pid, ledger, pending) == receipts.pending_receipts(pid, ledger, pending)


@pytest.mark.parametrize(
    ("pending", "error"),
    [([(1, 2, None)], TypeError), ([[1, 2, None, 4]], TypeError), ([(-1, 2, None, 4)], OverflowError),
     ([(1, 2, -5, 4)], OverflowError), ([(1, "2", None, 4)], TypeError), (5, TypeError)],
)
def test_pending_receipts_refuse_bad_items(pending: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        cc.pending_receipts(1, 2, pending)  # type: ignore[arg-type]


def test_encoders_leak_nothing() -> None:
    """Results and errors of 20,000 calls each leave no memory behind (refcounts right)."""
    data = b"p" * 200
    pending = [(i, i, None if i % 2 else i, 10) for i in range(10)]

    def run() -> None:
        for i in range(20_000):
            cc.message_frame(7, 3, i, -1, i % 3, [i, -i] if i % 2 else None, data)
            cc.pending_receipts(5, 3, pending)
            with pytest.raises(OverflowError):
                cc.message_frame(7, 3, -1, -1, 0, [1], data)

    grown = bytes_left_behind(run)
    assert grown < 64 * 1024, f"{grown} bytes left behind by 60,000 calls"


@pytest.mark.parametrize("partition", [-1, 0, 7, 2**31 - 1])
def test_message_frames_are_the_frames_back_to_back(partition: int) -> None:
    rng = random.Random(partition)
    for cid, ledger in ((0, 0), (1, 3), (300, 2**40), (U64, U64)):
        for n in (0, 1, 2, 50):
            eids = [rng.getrandbits(rng.choice((3, 7, 8, 21, 40, 64))) for _ in range(n)]
            datas = [rng.randbytes(rng.randrange(200)) for _ in range(n)]
            expected = b"".join(receipts.message(cid, ledger, e, partition, 0, None, d) for e, d in zip(eids, datas, strict=True))
            assert receipts.message_frames(cid, ledger, partition, eids, datas) == expected
            assert cc.message_frames(cid, ledger, partition, eids, datas) == expected
            assert cc.message_frames(cid, ledger, partition, tuple(eids), [bytearray(d) for d in datas]) == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [((1, 2, -1, [1, 2], [b"a"]), ValueError), ((1, 2, -1, [-1], [b"a"]), OverflowError),
     ((1, 2, -1, [1], ["a"]), TypeError), ((1, 2, -1, 5, [b"a"]), TypeError), ((-1, 2, -1, [], []), OverflowError),
     ((1, 2, -1, [1]), TypeError)],
)
def test_message_frames_refuse_bad_arguments(args: tuple[object, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        cc.message_frames(*args)  # type: ignore[arg-type]
    if error is ValueError:  # (the references do not check id ranges)
        with pytest.raises(error):
            receipts.message_frames(*args)  # type: ignore[arg-type]


def test_message_frames_leak_nothing() -> None:
    eids = list(range(1000, 1100))
    datas = [b"d" * (i % 300) for i in range(100)]

    def run() -> None:
        for _ in range(2_000):
            cc.message_frames(7, 3, -1, eids, datas)
            with pytest.raises(OverflowError):
                cc.message_frames(7, 3, -1, [*eids[:50], -1], datas[:51])

    grown = bytes_left_behind(run)
    assert grown < 64 * 1024, f"{grown} bytes left behind by 4,000 calls"


def test_message_encoder_is_the_compiled_one_with_the_references_bytes() -> None:
    """receipts.message_encoder(), what the dispatcher uses, is the compiled encoder when the codec
    is built (it is under make test), and its frame()/frames() write what MessageEncoder writes."""
    for partition in (-1, 0, 300):
        enc = receipts.message_encoder(7, 2**40, partition)
        ref = receipts.MessageEncoder(7, 2**40, partition)
        assert not isinstance(enc, receipts.MessageEncoder)
        for entry in (0, 128, 2**28):
            for redeliveries, ack_set in ((0, None), (3, [1, -1])):
                assert enc.frame(entry, redeliveries, ack_set, b"x" * 5) == ref.frame(entry, redeliveries, ack_set,
                                                                                   b"x" * 5)
        ids, datas = [5, 6, 2**21], [b"", b"a", b"b" * 300]
        assert enc.frames(ids, datas) == ref.frames(ids, datas) == receipts.message_frames(7, 2**40, partition, ids,
                                                                                            datas)
