# The read side of a managed ledger (ManagedLedger's base): committed entries by id, from
# the ledger's tail cache where it holds them and from the store below it, and the search
# by publish time. Reads never return an entry past the last confirmed one (_lc) or before
# the first stored one (_first); the ledger owns those fields and advances them.
from __future__ import annotations

from .cache import LedgerCache, Row, entry_of
from .entry import UNREAD, Entry
from .ledger_store import LedgerStore
from .message_counts import MessageCounts
from .position import Position


class LedgerReads:
    ledger_id: int
    _first: int
    _lc: int
    _cache: LedgerCache
    _store: LedgerStore
    counts: MessageCounts

    def read_entries(
        self, start_entry_id: int, max_entries: int, max_bytes: int = 8 * 1024 * 1024
    ) -> list[Entry]:
        start = max(start_entry_id, self._first)
        end = min(self._lc, start + max_entries - 1)
        out: list[Entry] = []
        if end < start:
            return out
        cache = self._cache
        cache_lo = cache.base if len(cache) else end + 1
        nbytes = 0
        if start < cache_lo:
            disk_end = min(end, cache_lo - 1)
            read: list[Row] = []
            nbytes = self._store._read_range(self.ledger_id, start, disk_end, max_bytes, read)
            out.extend([entry_of(r, UNREAD) for r in read])
            if nbytes >= max_bytes or len(out) < disk_end - start + 1:
                return out
            start = disk_end + 1
        rows, delivers = cache.rows_from(start, end - start + 1)
        for row, deliver in zip(rows, delivers, strict=True):
            out.append(entry_of(row, deliver))
            nbytes += row[4]
            if nbytes >= max_bytes:
                break
        return out

    def entries_holding(self, start_entry_id: int, messages: int, most: int) -> int:
        """How many entries from `start_entry_id` on hold `messages` messages: up to and
        including the one that reaches them (a batch is read whole); at least 1, at most
        `most`. A reader that can take only so many reads no more (a backlog of batch
        entries is not read a hundred at a time to send two)."""
        start = max(start_entry_id, self._first)
        last = min(self.counts.reaching(start, max(messages, 1)), self._lc)
        return max(1, min(most, last - start + 1))

    def read_rows(self, start_entry_id: int, max_entries: int) -> tuple[list[Row], list[int | None]]:
        """Committed entries from `start_entry_id` on (clamped to the first stored) as rows,
        with their delivery-time hints (UNREAD for rows read back from disk): the tail cache's
        rows as they are, no Entry per entry. Stops where the cache begins, if below it."""
        start = max(start_entry_id, self._first)
        end = min(self._lc, start + max_entries - 1)
        if end < start:
            return [], []
        cache = self._cache
        if len(cache) and start >= cache.base:
            return cache.rows_from(start, end - start + 1)
        if len(cache):
            end = min(end, cache.base - 1)
        rows: list[Row] = []
        self._store._read_range(self.ledger_id, start, end, 8 * 1024 * 1024, rows)
        return rows, [UNREAD] * len(rows)

    def read_entry(self, entry_id: int) -> Entry | None:
        if entry_id < self._first or entry_id > self._lc:
            return None
        e = self._cache.get(entry_id)
        if e is not None:
            return e
        out: list[Row] = []
        self._store._read_range(self.ledger_id, entry_id, entry_id, 1, out)
        return entry_of(out[0], UNREAD) if out else None

    def publish_time(self, entry_id: int) -> int | None:
        row = self._cache.row(entry_id)
        if row is not None:
            return row[2]
        return self._store._read_publish_time(self.ledger_id, entry_id)

    def find_entry_by_publish_time(self, ts_ms: int) -> Position:
        lo, hi = self._first, self._lc + 1
        while lo < hi:
            mid = (lo + hi) // 2
            pt = self.publish_time(mid)
            if pt is None or pt >= ts_ms:
                hi = mid
            else:
                lo = mid + 1
        return Position(self.ledger_id, lo)
