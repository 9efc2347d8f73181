"""The tail cache holds committed rows (no Entry per entry until a reader asks): its byte
count stays exact and under the limit while whole committed runs are evicted oldest first,
reads across the disk/cache boundary return every entry once, and a dropped or restarted
ledger cache gives its bytes back."""
from __future__ import annotations

import asyncio
from pathlib import Path

from storage_helpers import run_with_store

from letterbox.storage import Store
from letterbox.storage.cache import ENTRY_OVERHEAD, EntryCache, LedgerCache, Row
from letterbox.storage.entry import UNREAD


def rows(lid: int, first: int, n: int, size: int = 10) -> list[Row]:
    return [(lid, e, 100 + e, 1, size, bytes([e % 256]) * size) for e in range(first, first + n)]


def test_runs_are_evicted_whole_oldest_first_with_exact_bytes() -> None:
    cost = 10 + ENTRY_OVERHEAD
    cache = EntryCache(limit_bytes=cost * 25)
    a, b = LedgerCache(0), LedgerCache(0)
    cache.add_rows(a, rows(1, 0, 10), [None] * 10, 100)
    cache.add_rows(b, rows(2, 0, 10), [5] * 10, 100)
    assert cache.bytes == 20 * cost and len(a) == 10 and len(b) == 10
    cache.add_rows(a, rows(1, 10, 10), [None] * 10, 100)  # over the limit: a's first run goes
    assert cache.bytes == 20 * cost <= cache.limit
    assert a.base == 10 and len(a) == 10 and a.row(9) is None and a.get(10) is not None
    assert b.get(3) is not None and b.get(3).deliver_at_time == 5  # type: ignore[union-attr]
    got, delivers = a.rows_from(15, 100)
    assert [r[1] for r in got] == list(range(15, 20)) and delivers == [None] * 5
    assert a.rows_from(3, 5) == ([], [])


def test_evicted_rows_hold_no_data() -> None:
    """Large entries evicted one at a time: the rows left in the ledger cache's list hold at
    most the limit's worth of data (the list itself is compacted only every 1,024 rows)."""
    size = 1_000_000
    cache = EntryCache(limit_bytes=8 * (size + ENTRY_OVERHEAD))
    a = LedgerCache(0)
    for e in range(200):
        cache.add_rows(a, rows(1, e, 1, size), [None], size)
        held = sum(len(r[5]) for r in a._rows)
        assert held <= cache.limit, f"{held} bytes of evicted rows still held after entry {e}"
    assert len(a) == 8 and a.base == 192 and a.get(199) is not None and a.get(191) is None


def test_restart_and_drop_give_their_bytes_back() -> None:
    cost = 10 + ENTRY_OVERHEAD
    cache = EntryCache(limit_bytes=cost * 100)
    a, b = LedgerCache(0), LedgerCache(0)
    cache.add_rows(a, rows(1, 0, 10), [None] * 10, 100)
    cache.add_rows(b, rows(2, 0, 10), [None] * 10, 100)
    cache.add_rows(a, rows(1, 50, 5), [None] * 5, 50)  # not contiguous: a restarts at 50
    assert cache.bytes == 15 * cost and a.base == 50 and len(a) == 5
    cache.drop(b)
    assert cache.bytes == 5 * cost and len(b) == 0 and b.get(3) is None
    cache.add_rows(b, rows(2, 10, 3), [None] * 3, 30)  # a dropped cache takes nothing
    assert cache.bytes == 5 * cost
    cache.limit = cost * 4
    cache.add_rows(a, rows(1, 55, 1), [None], 10)  # a's stale first chunk is skipped, its live one goes
    assert cache.bytes == cost and a.base == 55 and len(a) == 1


def test_rows_with_gaps_in_their_ids_are_not_held() -> None:
    """Rows are found by position (id - base): a run whose ids are not consecutive is not
    held, and what was held before it is forgotten, so reads of those ids go to disk."""
    cost = 10 + ENTRY_OVERHEAD
    cache = EntryCache(limit_bytes=cost * 100)
    a = LedgerCache(0)
    cache.add_rows(a, rows(1, 0, 10), [None] * 10, 100)
    gapped = rows(1, 10, 5)[::2]  # ids 10, 12, 14
    cache.add_rows(a, gapped, [None] * 3, 30)
    assert cache.bytes == 0 and len(a) == 0 and a.base == 15
    assert a.rows_from(12, 3) == ([], []) and a.get(3) is None
    cache.add_rows(a, rows(1, 15, 2), [None] * 2, 20)
    assert cache.bytes == 2 * cost and [r[1] for r in a.rows_from(15, 5)[0]] == [15, 16]


def test_read_rows_cross_the_disk_and_cache_boundary(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(b"e%03d" % i * 100, 1, i, deliver_at_time=None) for i in range(100)))
        base = led._cache.base
        assert 0 < base < 100, base  # the small cache holds the newest entries only
        got, delivers = led.read_rows(0, 1000)
        assert [r[1] for r in got] == list(range(base))  # the disk part first, up to the cache
        assert delivers == [UNREAD] * base and got[3][5] == b"e003" * 100 and got[3][4] == 400
        got, delivers = led.read_rows(base, 1000)
        assert [r[1] for r in got] == list(range(base, 100)) and delivers == [None] * (100 - base)
        assert [e.entry_id for e in led.read_entries(0, 1000)] == list(range(100))

    run_with_store(tmp_path, body, cache_bytes=20 * (400 + ENTRY_OVERHEAD))
