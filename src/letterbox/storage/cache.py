# Tail cache of recently committed entries, shared by all ledgers of a Store.
#
# Each ledger owns a LedgerCache holding a CONTIGUOUS run of its newest entries
# [base, base + len) as the committed rows themselves (Row: the tuple the writer inserted,
# ledger_id, entry_id, publish_time, num_messages, size, data) plus a parallel list of their
# delivery-time hints: no Entry or Position per entry until a reader asks for one (get,
# entries) -- a dispatcher takes the rows as they are (rows_from). Rows are added only on
# commit, in entry-id order, a committed run at a time (extend), and removed only by
# eviction from the front, so the run stays contiguous and a read is "disk below base,
# cache from base on".
# The shared EntryCache evicts globally in insertion (FIFO) order, a committed run (a chunk)
# at a time: its deque holds one _Chunk (ledger cache, generation, last entry id, cost) per run.
# Invariants: EntryCache.bytes == the cost of the rows cached (size + ENTRY_OVERHEAD each)
# and <= limit after every add; a chunk whose ledger cache was dropped or restarted (its
# generation moved) is stale: its cost was already taken off when that happened.
# Trimmed entries are not removed (readers clamp to first_position); a deleted ledger's cache
# is dropped with EntryCache.drop(). An evicted row's slot is overwritten at once (the list is
# compacted only every 1,024 rows): the data of evicted rows is never held (5 MB entries!).
from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .entry import Entry
from .position import Position

ENTRY_OVERHEAD = 120  # rough per-entry Python object cost (row tuple + bytes header)

Row = tuple[int, int, int, int, int, bytes]  # ledger_id, entry_id, publish_time, num, size, data
_EVICTED: Row = (0, 0, 0, 0, 0, b"")  # fills an evicted slot until the list is compacted


def row_of(entry: Entry) -> Row:
    p = entry.position
    return (p.ledger_id, p.entry_id, entry.publish_time, entry.num_messages, len(entry.data), entry.data)


def entry_of(row: Row, deliver_at_time: int | None) -> Entry:
    return Entry(Position(row[0], row[1]), row[5], row[3], row[2], deliver_at_time)


class LedgerCache:
    __slots__ = ("_delivers", "_head", "_rows", "base", "cost", "dropped", "generation")

    def __init__(self, next_entry_id: int) -> None:
        self.dropped = False
        self.generation = 0  # moves when the run restarts (its chunks become stale)
        self._rows: list[Row] = []
        self._delivers: list[int | None] = []
        self._head = 0
        self.base = next_entry_id  # entry id of _rows[_head]
        self.cost = 0  # bytes (with overhead) of the rows held

    def __len__(self) -> int:
        return len(self._rows) - self._head

    def _index(self, entry_id: int) -> int:
        """Where `entry_id` is held in _rows, or -1."""
        i = entry_id - self.base
        if i < 0:
            return -1
        i += self._head
        return i if i < len(self._rows) else -1

    def row(self, entry_id: int) -> Row | None:
        i = self._index(entry_id)
        return self._rows[i] if i >= 0 else None

    def get(self, entry_id: int) -> Entry | None:
        i = self._index(entry_id)
        return entry_of(self._rows[i], self._delivers[i]) if i >= 0 else None

    def rows_from(self, entry_id: int, count: int) -> tuple[list[Row], list[int | None]]:
        """Up to `count` cached rows from `entry_id` on (none if it is below base), with
        their delivery-time hints."""
        i = entry_id - self.base
        if i < 0:
            return [], []
        i += self._head
        return self._rows[i:i + count], self._delivers[i:i + count]

    def _extend(self, rows: Sequence[Row], delivers: Sequence[int | None], cost: int) -> int:
        """Add rows after the last one held; returns the cost of rows forgotten meanwhile."""
        freed = 0
        if rows[0][1] != self.base + len(self):
            # not contiguous (cannot happen with sequential appends): restart the run
            freed = self._restart(rows[0][1])
        self._rows.extend(rows)
        self._delivers.extend(delivers)
        self.cost += cost
        return freed

    def _restart(self, base: int) -> int:
        """Forget every row (their chunks go stale); returns the cost they had."""
        freed = self.cost
        self.base = base
        self._rows = []
        self._delivers = []
        self._head = 0
        self.cost = 0
        self.generation += 1
        return freed

    def _pop_through(self, last_entry_id: int, cost: int) -> None:
        k = min(last_entry_id - self.base + 1, len(self))
        if k <= 0:
            return
        rows, head = self._rows, self._head
        for i in range(head, head + k):  # the evicted rows' data is freed now, not at compaction
            rows[i] = _EVICTED
        self._head += k
        self.base += k
        self.cost -= cost
        if self._head >= 1024 and self._head * 2 >= len(self._rows):
            del self._rows[: self._head]
            del self._delivers[: self._head]
            self._head = 0


class _Chunk:
    """One committed run in the eviction fifo."""

    __slots__ = ("cost", "generation", "last", "lcache")

    def __init__(self, lcache: LedgerCache, last: int, cost: int) -> None:
        self.lcache = lcache
        self.generation = lcache.generation
        self.last = last
        self.cost = cost


class EntryCache:
    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.bytes = 0
        self._fifo: deque[_Chunk] = deque()

    def add(self, lcache: LedgerCache, entry: Entry) -> None:
        self.add_rows(lcache, [row_of(entry)], [entry.deliver_at_time], len(entry.data))

    def add_rows(self, lcache: LedgerCache, rows: Sequence[Row], delivers: Sequence[int | None],
                 nbytes: int) -> None:
        """Committed rows of one ledger, in entry-id order after what it holds; `nbytes`
        is the sum of their sizes."""
        if not rows or lcache.dropped:
            return
        if rows[-1][1] - rows[0][1] != len(rows) - 1:
            # ids with gaps cannot be indexed by position: hold none of them (reads go to disk)
            self.bytes -= lcache._restart(rows[-1][1] + 1)
            return
        cost = nbytes + ENTRY_OVERHEAD * len(rows)
        self.bytes += cost - lcache._extend(rows, delivers, cost)
        self._fifo.append(_Chunk(lcache, rows[-1][1], cost))
        while self.bytes > self.limit and self._fifo:
            ch = self._fifo.popleft()
            lc = ch.lcache
            if ch.generation == lc.generation:  # else stale: its cost is already gone
                lc._pop_through(ch.last, ch.cost)
                self.bytes -= ch.cost

    def drop(self, lcache: LedgerCache) -> None:
        lcache.dropped = True
        self.bytes -= lcache._restart(lcache.base + len(lcache))
        self._fifo = deque(ch for ch in self._fifo if ch.lcache is not lcache)
