# Compact sets of acknowledged entry ids and batch-index bitsets.
#
# RangeSet invariants: two parallel sorted lists `starts`/`ends` of inclusive intervals that are
# disjoint AND non-adjacent (end + 1 < next start): adding an id merges with its neighbours, so
# acking a contiguous run always collapses to one interval, never one element per id.
# Batch bitsets are Python ints where bit i set == batch index i ACKED; they are converted to
# Pulsar's ack_set (bit set == still to deliver) with to_ack_set_words().
from __future__ import annotations

from bisect import bisect_right

_WORD = (1 << 64) - 1


class RangeSet:
    __slots__ = ("ends", "starts")

    def __init__(self, ranges: list[tuple[int, int]] | None = None) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for s, e in sorted(ranges or []):
            self.add_range(s, e)

    def __len__(self) -> int:
        return len(self.starts)

    def __contains__(self, x: int) -> bool:
        i = bisect_right(self.starts, x)
        return i > 0 and self.ends[i - 1] >= x

    def add(self, x: int) -> bool:
        """Insert one id; returns False if it was already present."""
        starts, ends = self.starts, self.ends
        i = bisect_right(starts, x)
        if i > 0 and ends[i - 1] >= x:
            return False
        left = i > 0 and ends[i - 1] == x - 1
        right = i < len(starts) and starts[i] == x + 1
        if left and right:
            ends[i - 1] = ends[i]
            del starts[i]
            del ends[i]
        elif left:
            ends[i - 1] = x
        elif right:
            starts[i] = x
        else:
            starts.insert(i, x)
            ends.insert(i, x)
        return True

    def add_range(self, s: int, e: int) -> bool:
        """Insert the inclusive interval [s, e], merging everything it touches; returns
        False if every id of it was already present."""
        if e < s:
            return False
        starts, ends = self.starts, self.ends
        lo = bisect_right(ends, s - 2)  # first interval that ends at or after s - 1
        hi = bisect_right(starts, e + 1)  # intervals [lo, hi) overlap or touch [s, e]
        if lo < hi:
            if starts[lo] <= s and e <= ends[lo]:  # inside one interval (they never touch)
                return False
            s = min(s, starts[lo])
            e = max(e, ends[hi - 1])
        starts[lo:hi] = [s]
        ends[lo:hi] = [e]
        return True

    def absorb_from(self, mark_delete: int) -> int:
        """Drop ids <= mark_delete; if an interval then starts at mark_delete + 1, consume it.
        Returns the new mark_delete."""
        i = bisect_right(self.ends, mark_delete)
        if i:
            del self.starts[:i]
            del self.ends[:i]
        if self.starts and self.starts[0] <= mark_delete + 1:
            mark_delete = self.ends[0]
            del self.starts[0]
            del self.ends[0]
        return mark_delete

    def copy(self) -> RangeSet:
        """An independent copy (the lists copied as they are: already sorted and merged)."""
        c = RangeSet()
        c.starts = self.starts.copy()
        c.ends = self.ends.copy()
        return c

    def clear(self) -> None:
        self.starts.clear()
        self.ends.clear()

    def to_list(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends, strict=True))


def to_ack_set_words(batch_size: int, acked_mask: int) -> list[int]:
    """java.util.BitSet.toLongArray() of the UNACKED indexes (signed int64 words, LSB first,
    trailing zero words trimmed)."""
    unacked = ~acked_mask & ((1 << batch_size) - 1)
    words: list[int] = []
    while unacked:
        w = unacked & _WORD
        words.append(w - (1 << 64) if w >= 1 << 63 else w)
        unacked >>= 64
    return words
