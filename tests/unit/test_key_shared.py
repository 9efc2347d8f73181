"""Key_Shared hashing and hash-range assignment, without a broker."""
from __future__ import annotations

import itertools
import struct

import pytest

from letterbox.broker.topics.key_shared import (
    HASH_RANGE_SIZE,
    ConsumerAssignError,
    HashRangeSelector,
    murmur3_32,
    sticky_key_hash,
)
from letterbox.errors import ServerError


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def reference_murmur3_32(key: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 written from Austin Appleby's reference C code."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h1 = seed & 0xFFFFFFFF
    nblocks = len(key) // 4
    for (k1,) in struct.iter_unpack("<I", key[: nblocks * 4]):
        k1 = (k1 * c1) & 0xFFFFFFFF
        k1 = _rotl(k1, 15)
        k1 = (k1 * c2) & 0xFFFFFFFF
        h1 ^= k1
        h1 = _rotl(h1, 13)
        h1 = (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = key[nblocks * 4 :]
    k1 = 0
    if len(tail) == 3:
        k1 ^= tail[2] << 16
    if len(tail) >= 2:
        k1 ^= tail[1] << 8
    if len(tail) >= 1:
        k1 ^= tail[0]
        k1 = (k1 * c1) & 0xFFFFFFFF
        k1 = _rotl(k1, 15)
        k1 = (k1 * c2) & 0xFFFFFFFF
        h1 ^= k1
    h1 ^= len(key)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1


# Published MurmurHash3_x86_32 test vectors (SMHasher / widely reproduced).
VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"abc", 0, 0xB3DD93FA),
    (b"hello", 0, 0x248BFA47),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
]


@pytest.mark.parametrize(("data", "seed", "expected"), VECTORS)
def test_murmur3_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert reference_murmur3_32(data, seed) == expected  # the inline reference agrees
    assert murmur3_32(data, seed) == expected


def test_murmur3_matches_reference_on_many_inputs() -> None:
    for n in range(70):
        data = bytes((i * 37 + n) & 0xFF for i in range(n))
        for seed in (0, 1, 0x9747B28C):
            assert murmur3_32(data, seed) == reference_murmur3_32(data, seed), (n, seed)


def test_sticky_key_hash_clears_sign_bit_then_takes_slot() -> None:
    # Pulsar: (murmur3_32(key) & Integer.MAX_VALUE) % 65536
    for key in (b"", b"hello", b"key-1", "ключ".encode(), b"\xff" * 9):
        expected = (reference_murmur3_32(key) & 0x7FFFFFFF) % HASH_RANGE_SIZE
        assert sticky_key_hash(key) == expected
        assert 0 <= sticky_key_hash(key) < HASH_RANGE_SIZE


# ----------------------------------------------------------------- HashRangeSelector


class Cons:
    """A consumer stand-in: the selector tracks consumers by identity."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _consumers(names: str) -> dict[str, Cons]:
    return {n: Cons(n) for n in names}


def _assert_partition(sel: HashRangeSelector[Cons]) -> None:
    """Ranges are sorted, disjoint and cover every slot exactly once."""
    ranges = sel.ranges()
    assert ranges[0][0] == 0 and ranges[-1][1] == HASH_RANGE_SIZE - 1
    for (_, e, _c), (s2, _e2, _c2) in itertools.pairwise(ranges):
        assert s2 == e + 1, ranges
    for s, e, _ in ranges:
        assert s <= e


def _spans(sel: HashRangeSelector[Cons]) -> list[tuple[int, int, str]]:
    return [(s, e, c.name) for s, e, c in sel.ranges()]


def test_first_consumer_owns_everything() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    k = _consumers("abcd")
    assert sel.select(0) is None
    sel.add(k["a"])
    assert _spans(sel) == [(0, 65535, "a")]
    assert sel.select(0) is sel.select(65535) is k["a"]


def test_auto_split_halves_the_largest_range() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    k = _consumers("abcd")
    sel.add(k["a"])
    sel.add(k["b"])
    assert _spans(sel) == [(0, 32767, "a"), (32768, 65535, "b")]
    sel.add(k["c"])  # equal sizes: the first largest range is split
    assert _spans(sel) == [(0, 16383, "a"), (16384, 32767, "c"), (32768, 65535, "b")]
    sel.add(k["d"])  # b's range is now the largest
    assert _spans(sel) == [
        (0, 16383, "a"), (16384, 32767, "c"), (32768, 49151, "b"), (49152, 65535, "d")
    ]
    _assert_partition(sel)
    for slot, owner in ((0, "a"), (16383, "a"), (16384, "c"), (32767, "c"), (32768, "b"),
                        (49151, "b"), (49152, "d"), (65535, "d")):
        assert sel.select(slot) is k[owner]


def test_removal_hands_ranges_to_the_lower_neighbour() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    k = _consumers("abcd")
    for name in "abcd":
        sel.add(k[name])
    sel.remove(k["c"])  # [16384, 32767] goes to a, just below it, and merges
    assert _spans(sel) == [(0, 32767, "a"), (32768, 49151, "b"), (49152, 65535, "d")]
    sel.remove(k["d"])
    assert _spans(sel) == [(0, 32767, "a"), (32768, 65535, "b")]
    _assert_partition(sel)


def test_removing_the_first_range_owner_hands_it_upwards() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    k = _consumers("abcd")
    for name in "abc":
        sel.add(k[name])
    sel.remove(k["a"])  # [0, 16383] has no lower neighbour: c (just above) takes it
    assert _spans(sel) == [(0, 32767, "c"), (32768, 65535, "b")]
    sel.remove(k["c"])
    assert _spans(sel) == [(0, 65535, "b")]
    sel.remove(k["b"])
    assert sel.ranges() == []
    assert sel.select(100) is None


def test_any_add_remove_sequence_keeps_every_slot_owned() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    live: list[Cons] = []
    for step in range(60):
        if step % 3 == 2 and len(live) > 1:
            gone = live.pop((step * 7) % len(live))
            sel.remove(gone)
        else:
            live.append(Cons(f"c{step}"))
            sel.add(live[-1])
        _assert_partition(sel)
        assert {id(c) for _, _, c in sel.ranges()} == {id(c) for c in live}


def test_removing_an_unknown_consumer_changes_nothing() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector()
    k = _consumers("abcd")
    sel.add(k["a"])
    sel.add(k["b"])
    before = sel.ranges()
    sel.remove(Cons("zzz"))
    assert sel.ranges() == before


def test_sticky_ranges_are_assigned_as_declared() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector(auto_split=False)
    k = _consumers("abcd")
    sel.add(k["a"], [(0, 99), (1000, 1999)])
    sel.add(k["b"], [(100, 999)])
    assert _spans(sel) == [(0, 99, "a"), (100, 999, "b"), (1000, 1999, "a")]
    assert sel.select(50) is k["a"] and sel.select(100) is k["b"] and sel.select(1999) is k["a"]
    assert sel.select(2000) is None  # slots nobody declared have no owner
    sel.remove(k["b"])  # sticky ranges are not handed over
    assert sel.select(500) is None
    assert _spans(sel) == [(0, 99, "a"), (1000, 1999, "a")]


@pytest.mark.parametrize(
    "wanted", [[(50, 150)], [(0, 0)], [(99, 99)], [(200, 300), (10, 20)], [(0, 65535)]]
)
def test_sticky_overlap_is_refused_atomically(wanted: list[tuple[int, int]]) -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector(auto_split=False)
    k = _consumers("abcd")
    sel.add(k["a"], [(0, 99)])
    with pytest.raises(ConsumerAssignError) as info:
        sel.add(k["b"], wanted)
    assert "overlaps" in str(info.value)
    assert info.value.code == ServerError.ConsumerAssignError
    assert _spans(sel) == [(0, 99, "a")]  # nothing of b was added


@pytest.mark.parametrize("bad", [(-1, 5), (10, 5), (0, 65536)])
def test_sticky_range_out_of_bounds_is_refused(bad: tuple[int, int]) -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector(auto_split=False)
    k = _consumers("abcd")
    with pytest.raises(ConsumerAssignError) as info:
        sel.add(k["a"], [bad])
    assert "invalid hash range" in str(info.value)
    assert sel.ranges() == []


def test_sticky_selector_requires_ranges() -> None:
    sel: HashRangeSelector[Cons] = HashRangeSelector(auto_split=False)
    k = _consumers("abcd")
    with pytest.raises(ConsumerAssignError) as info:
        sel.add(k["a"])
    assert "hash ranges" in str(info.value)
