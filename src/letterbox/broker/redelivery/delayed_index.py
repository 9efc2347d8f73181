# The per-subscription index of entries held back until a time: delayed
# delivery (`deliver_at_time`) and broker-side redelivery backoff (Pulsar's
# InMemoryDelayedDeliveryTracker, built compactly). Entries are grouped in
# one-second buckets; a bucket is two flat int64 arrays (times, entry ids), so
# a million pending entries cost ~16 MB rather than a Python object each. A
# bucket is unpacked into a sorted list only once its second has begun, so
# popping k due entries costs O(k) and entries due later stay compact.
# Invariants: an entry is returned by pop_due only once its time has passed;
# every tracked entry is either in the head list (at or after `_pos`) or in
# exactly one bucket whose key is in `_heap`; every bucket key in `_heap` is
# greater than `_head_key`.
from __future__ import annotations

import bisect
import heapq
import time
from array import array
from collections.abc import Callable

BUCKET_MS = 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class DelayedDeliveryTracker:
    def __init__(self, clock: Callable[[], int] = _wall_ms) -> None:
        self._clock = clock
        self._buckets: dict[int, tuple[array[int], array[int]]] = {}
        self._heap: list[int] = []
        self._head: list[tuple[int, int]] = []  # (deliver_at, entry_id), sorted
        self._head_key = -1
        self._pos = 0
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, entry_id: int, deliver_at_ms: int) -> bool:
        """Track an entry; False (not tracked) if it is already due."""
        if deliver_at_ms <= self._clock():
            return False
        key = deliver_at_ms // BUCKET_MS
        if key <= self._head_key:
            bisect.insort(self._head, (deliver_at_ms, entry_id), lo=self._pos)
        else:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = (array("q"), array("q"))
                self._buckets[key] = bucket
                heapq.heappush(self._heap, key)
            bucket[0].append(deliver_at_ms)
            bucket[1].append(entry_id)
        self._n += 1
        return True

    def _promote(self, now: int) -> None:
        """Unpack due buckets into the head list. A bucket is unpacked only once its
        second has begun, so entries due later stay in the compact arrays."""
        while self._pos >= len(self._head) and self._heap and self._heap[0] * BUCKET_MS <= now:
            key = heapq.heappop(self._heap)
            times, ids = self._buckets.pop(key)
            self._head = sorted(zip(times, ids, strict=True))
            self._head_key = key
            self._pos = 0

    def next_due_ms(self) -> int | None:
        """When to look again: the earliest due time, or the start of the earliest
        bucket not unpacked yet (never later than the earliest due time)."""
        if self._pos < len(self._head):
            return self._head[self._pos][0]
        return self._heap[0] * BUCKET_MS if self._heap else None

    def pop_due(self, now_ms: int | None = None, limit: int | None = None) -> list[int]:
        """Entry ids whose time has come, in entry (ledger) order."""
        now = self._clock() if now_ms is None else now_ms
        out: list[int] = []
        while limit is None or len(out) < limit:
            self._promote(now)
            if self._pos >= len(self._head):
                break
            at, eid = self._head[self._pos]
            if at > now:
                break
            out.append(eid)
            self._pos += 1
        self._n -= len(out)
        if self._pos >= len(self._head):
            self._head, self._pos = [], 0
        elif self._pos > 4096 and self._pos * 2 > len(self._head):
            del self._head[: self._pos]
            self._pos = 0
        out.sort()
        return out

    def clear(self) -> None:
        self._buckets.clear()
        self._heap.clear()
        self._head, self._pos, self._head_key, self._n = [], 0, -1, 0
