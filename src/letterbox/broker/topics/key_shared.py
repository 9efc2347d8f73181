# Key_Shared consumer selection. The sticky key of an entry is its ordering
# key, else its partition key, else empty; its hash is Murmur3-32 (seed 0,
# sign bit cleared) modulo the 65536-slot range, as Pulsar computes it, so a
# consumer that declares sticky ranges sees the same keys it would on Pulsar.
# Auto-split mode: the first consumer owns [0, 65535]; each new consumer takes
# the upper half of the largest range; a leaving consumer's ranges go to the
# owner of the adjacent lower range (or upper, for the first range).
from __future__ import annotations

from typing import Generic, TypeVar

from letterbox.errors import LetterboxError, ServerError

HASH_RANGE_SIZE = 65536
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    h = seed & _M32
    n = len(data)
    full = n - (n % 4)
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[full:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def sticky_key_hash(key: bytes) -> int:
    return (murmur3_32(key) & 0x7FFFFFFF) % HASH_RANGE_SIZE


C = TypeVar("C")


class ConsumerAssignError(LetterboxError):
    code = ServerError.ConsumerAssignError


class HashRangeSelector(Generic[C]):
    """Maps hash slots to consumers with inclusive ranges [start, end]."""

    def __init__(self, auto_split: bool = True) -> None:
        self.auto_split = auto_split
        self._ranges: list[tuple[int, int, C]] = []  # sorted by start

    def ranges(self) -> list[tuple[int, int, C]]:
        return list(self._ranges)

    def add(self, consumer: C, sticky: list[tuple[int, int]] | None = None) -> None:
        if sticky:
            self._add_sticky(consumer, sticky)
        elif not self.auto_split:
            raise ConsumerAssignError("a sticky Key_Shared consumer must declare hash ranges")
        else:
            self._add_split(consumer)

    def _add_sticky(self, consumer: C, wanted: list[tuple[int, int]]) -> None:
        for start, end in wanted:
            if not 0 <= start <= end < HASH_RANGE_SIZE:
                raise ConsumerAssignError(
                    f"invalid hash range [{start}, {end}]: ranges must lie within 0..{HASH_RANGE_SIZE - 1}"
                )
            for s, e, _ in self._ranges:
                if start <= e and s <= end:
                    raise ConsumerAssignError(
                        f"hash range [{start}, {end}] overlaps a range [{s}, {e}] of another consumer"
                    )
        for start, end in wanted:
            self._ranges.append((start, end, consumer))
        self._ranges.sort(key=lambda r: r[0])

    def _add_split(self, consumer: C) -> None:
        if not self._ranges:
            self._ranges = [(0, HASH_RANGE_SIZE - 1, consumer)]
            return
        idx = max(range(len(self._ranges)), key=lambda i: self._ranges[i][1] - self._ranges[i][0])
        s, e, owner = self._ranges[idx]
        if e == s:
            raise ConsumerAssignError("no hash range left to split for a new Key_Shared consumer")
        mid = s + (e - s) // 2
        self._ranges[idx : idx + 1] = [(s, mid, owner), (mid + 1, e, consumer)]

    def remove(self, consumer: C) -> None:
        if not self.auto_split:
            self._ranges = [r for r in self._ranges if r[2] is not consumer]
            return
        out: list[tuple[int, int, C]] = []
        orphans: list[tuple[int, int]] = []
        for s, e, c in self._ranges:
            if c is consumer:
                orphans.append((s, e))
            else:
                out.append((s, e, c))
        for s, e in orphans:
            if not out:
                break
            # hand the slot range to the neighbour just below it, else just above
            below = [i for i, r in enumerate(out) if r[1] < s]
            i = below[-1] if below else 0
            out.append((s, e, out[i][2]))
            out.sort(key=lambda r: r[0])
        self._ranges = _merge_adjacent(out)

    def select(self, hash_value: int) -> C | None:
        lo, hi = 0, len(self._ranges) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            s, e, c = self._ranges[mid]
            if hash_value < s:
                hi = mid - 1
            elif hash_value > e:
                lo = mid + 1
            else:
                return c
        return None


def _merge_adjacent(ranges: list[tuple[int, int, C]]) -> list[tuple[int, int, C]]:
    merged: list[tuple[int, int, C]] = []
    for s, e, c in ranges:
        if merged and merged[-1][2] is c and merged[-1][1] + 1 == s:
            merged[-1] = (merged[-1][0], e, c)
        else:
            merged.append((s, e, c))
    return merged
