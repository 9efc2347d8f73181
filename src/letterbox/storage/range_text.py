# The JSON text of a cursor's acknowledged ranges (`[[start,end],...]`, the
# record's "ranges" member), re-encoded only where the ranges changed.
# While a few unacknowledged messages hold the mark-delete back a cursor keeps
# thousands of ranges, and every record write serialized all of them (about
# 7 ms per write at 10,000 ranges). The ranges are cut into buckets by entry id
# (a range belongs to the bucket of its start); each bucket's text is kept with
# the starts and ends it was encoded from and reused while they compare equal
# (a C-level list comparison), so a write re-encodes only the buckets where
# acks landed. The text is byte-for-byte what json.dumps gives for the list of
# pairs: the record format does not change.
# Invariants: the cache is keyed by content only (a replaced or cleared range
# set is simply re-encoded); memory is one str and two short lists per bucket.
from __future__ import annotations

from bisect import bisect_left

from .ack_ranges import RangeSet

BUCKET_IDS = 4096  # entry ids per bucket


class RangeText:
    __slots__ = ("_buckets",)

    def __init__(self) -> None:
        # bucket number -> (starts, ends, text of those pairs without the outer brackets)
        self._buckets: dict[int, tuple[list[int], list[int], str]] = {}

    def encode(self, ranges: RangeSet) -> str:
        starts, ends = ranges.starts, ranges.ends
        n = len(starts)
        if n == 0:
            self._buckets.clear()
            return "[]"
        old = self._buckets
        new: dict[int, tuple[list[int], list[int], str]] = {}
        parts: list[str] = []
        i = 0
        while i < n:
            b = starts[i] // BUCKET_IDS
            j = bisect_left(starts, (b + 1) * BUCKET_IDS, i)
            s, e = starts[i:j], ends[i:j]
            cached = old.get(b)
            if cached is not None and cached[0] == s and cached[1] == e:
                text = cached[2]
            else:
                text = ",".join([f"[{x},{y}]" for x, y in zip(s, e, strict=True)])
            new[b] = (s, e, text)
            parts.append(text)
            i = j
        self._buckets = new
        return f"[{','.join(parts)}]"
