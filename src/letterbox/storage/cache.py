# Tail cache of recently appended entries, shared by all ledgers of a Store.
#
# Each ledger owns a LedgerCache holding a CONTIGUOUS run of its newest entries
# [base, base + len). Entries are added only by append (in entry-id order) and removed only by
# eviction from the front, so the run stays contiguous and a read is "disk below base, cache
# from base on". The shared EntryCache evicts globally in insertion (FIFO) order: its deque
# holds one reference to the owning LedgerCache per cached entry, and popping it evicts that
# ledger's oldest entry.
# Invariant: EntryCache.bytes (data + ENTRY_OVERHEAD per entry) <= limit after every add.
# Trimmed entries are not removed (readers clamp to first_position); a deleted ledger's cache
# is dropped with EntryCache.drop().
from __future__ import annotations

from collections import deque

from .entry import Entry

ENTRY_OVERHEAD = 200  # rough per-entry Python object cost (Entry + Position + bytes header)


def entry_cost(entry: Entry) -> int:
    return len(entry.data) + ENTRY_OVERHEAD


class LedgerCache:
    __slots__ = ("_head", "_items", "base", "dropped")

    def __init__(self, next_entry_id: int) -> None:
        self.dropped = False
        self._items: list[Entry | None] = []
        self._head = 0
        self.base = next_entry_id  # entry id of _items[_head]

    def __len__(self) -> int:
        return len(self._items) - self._head

    def get(self, entry_id: int) -> Entry | None:
        i = entry_id - self.base
        if i < 0:
            return None
        i += self._head
        if i >= len(self._items):
            return None
        return self._items[i]

    def _push(self, entry: Entry) -> None:
        if entry.position.entry_id != self.base + len(self):
            # not contiguous (cannot happen with sequential appends): restart the run
            self._items = []
            self._head = 0
            self.base = entry.position.entry_id
        self._items.append(entry)

    def _pop_front(self) -> Entry | None:
        if self._head >= len(self._items):
            return None
        e = self._items[self._head]
        self._items[self._head] = None
        self._head += 1
        self.base += 1
        if self._head >= 1024 and self._head * 2 >= len(self._items):
            del self._items[: self._head]
            self._head = 0
        return e

    def _clear(self) -> list[Entry]:
        live = [e for e in self._items[self._head :] if e is not None]
        self.base += len(self)
        self._items = []
        self._head = 0
        return live


class EntryCache:
    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.bytes = 0
        self._fifo: deque[LedgerCache] = deque()
        self._stale = 0  # fifo references to dropped ledger caches

    def add(self, lcache: LedgerCache, entry: Entry) -> None:
        lcache._push(entry)
        self._fifo.append(lcache)
        self.bytes += entry_cost(entry)
        while self.bytes > self.limit and self._fifo:
            victim = self._fifo.popleft()._pop_front()
            if victim is not None:
                self.bytes -= entry_cost(victim)

    def drop(self, lcache: LedgerCache) -> None:
        lcache.dropped = True
        live = lcache._clear()
        for e in live:
            self.bytes -= entry_cost(e)
        self._stale += len(live)
        if self._stale * 2 > len(self._fifo):
            self._fifo = deque(lc for lc in self._fifo if not lc.dropped)
            self._stale = 0
