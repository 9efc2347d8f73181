from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from storage_helpers import payload, run_with_store, submitted

from letterbox.storage import LedgerClosedError, Position, Store


def test_append_contiguous_and_resolves_after_commit(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.last_confirmed == Position(led.ledger_id, -1)
        assert led.first_position == Position(led.ledger_id, 0)
        seen: list[Position] = []
        led.add_confirm_listener(seen.append)
        futs = [led.append(payload(i), 1, 1000 + i) for i in range(10)]
        # ids are assigned synchronously; nothing is confirmed before the commit
        assert led.last_confirmed.entry_id == -1
        assert led.read_entries(0, 10) == []
        positions = await asyncio.gather(*futs)
        assert [p.entry_id for p in positions] == list(range(10))
        assert all(p.ledger_id == led.ledger_id for p in positions)
        assert led.last_confirmed.entry_id == 9
        assert seen and seen[-1].entry_id == 9
        assert [e.data for e in led.read_entries(0, 100)] == [payload(i) for i in range(10)]

    run_with_store(tmp_path, body)


def test_group_commit(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"x", 1, 1)
        before = store.commit_count
        futs = [led.append(payload(i, 200), 1, i) for i in range(1000)]
        await asyncio.gather(*futs)
        commits = store.commit_count - before
        assert 1 <= commits < 100, commits

    run_with_store(tmp_path, body)


def test_read_from_cache_and_disk(tmp_path: Path) -> None:
    n = 200

    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(payload(i, 1000), 1 + i % 3, i) for i in range(n)))
        got = led.read_entries(0, n)
        assert [e.position.entry_id for e in got] == list(range(n))
        again = led.read_entry(5)  # served from the cache: the same data object, no disk read
        assert again == got[5] and again is not None and again.data is got[5].data

    run_with_store(tmp_path, write)

    async def reread(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        assert led.last_confirmed.entry_id == n - 1
        got = led.read_entries(0, n)
        assert [e.data for e in got] == [payload(i, 1000) for i in range(n)]
        assert [e.num_messages for e in got] == [1 + i % 3 for i in range(n)]
        assert [e.publish_time for e in got] == list(range(n))
        # mixed: old entries from disk, new ones from the cache
        await led.append(b"new", 1, 999)
        got = led.read_entries(n - 2, 10)
        assert [e.position.entry_id for e in got] == [n - 2, n - 1, n]
        assert got[-1].data == b"new"
        # max_bytes stops early but always returns at least one entry
        assert len(led.read_entries(0, n, max_bytes=1)) == 1
        assert len(led.read_entries(0, n, max_bytes=2500)) == 3
        assert led.read_entry(n + 5) is None
        assert led.size_bytes() == n * 1000 + 3

    run_with_store(tmp_path, reread)


def test_small_cache_still_reads_everything(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(payload(i, 500), 1, i) for i in range(100)))
        assert store._cache.bytes <= 4096
        got = led.read_entries(0, 1000)
        assert [e.data for e in got] == [payload(i, 500) for i in range(100)]

    run_with_store(tmp_path, body, cache_bytes=4096)


def test_sequence_ids_survive_restart(tmp_path: Path) -> None:
    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.last_sequence_id("p1") == -1
        fut = led.append(b"a", 1, 1, producer_name="p1", sequence_id=7)
        assert led.last_pushed_sequence_id("p1") == 7
        await fut
        await led.append(b"b", 1, 1, producer_name="p2", sequence_id=3)
        await led.append(b"c", 1, 1, producer_name="p1", sequence_id=8)
        assert led.last_sequence_id("p1") == 8

    run_with_store(tmp_path, write)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.last_sequence_id("p1") == 8
        assert led.last_sequence_id("p2") == 3
        assert led.last_sequence_id("p3") == -1
        assert (await led.append(b"d", 1, 1)).entry_id == 3

    run_with_store(tmp_path, check)


def test_find_entry_by_publish_time(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.find_entry_by_publish_time(5) == Position(led.ledger_id, 0)
        await asyncio.gather(*(led.append(b"x", 1, 100 + 10 * i) for i in range(50)))
        lid = led.ledger_id
        assert led.find_entry_by_publish_time(0) == Position(lid, 0)
        assert led.find_entry_by_publish_time(100) == Position(lid, 0)
        assert led.find_entry_by_publish_time(101) == Position(lid, 1)
        assert led.find_entry_by_publish_time(350) == Position(lid, 25)
        assert led.find_entry_by_publish_time(10_000) == Position(lid, 50)

    run_with_store(tmp_path, body)
    run_with_store(  # from disk after restart
        tmp_path,
        lambda s: _check_find(s),
    )


async def _check_find(store: Store) -> None:
    led = store.open_ledger("t")
    assert led.find_entry_by_publish_time(355).entry_id == 26


def test_count_messages(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(b"x", i + 1, 0) for i in range(10)))  # 1..10
        assert led.count_messages(-1) == 55
        assert led.count_messages(4) == 55 - 15
        assert led.count_messages(9) == 0
        assert led.count_messages(100) == 0
        fut = led.append(b"y", 100, 0)
        assert led.count_messages(-1) == 55  # unconfirmed entries are not counted
        await fut
        assert led.count_messages(-1) == 155

    run_with_store(tmp_path, body)
    run_with_store(tmp_path, lambda s: _check_count(s))


async def _check_count(store: Store) -> None:
    led = store.open_ledger("t")
    assert led.count_messages(-1) == 155
    assert led.count_messages(8) == 110


def test_entries_holding_counts_the_entries_a_reader_needs(tmp_path: Path) -> None:
    """How many entries from a position hold N messages: through the one that reaches N (a
    batch is read whole), at least one, at most the cap, never past the last confirmed."""
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(b"x", 50, 0) for _ in range(10)))  # 10 batches of 50
        assert led.entries_holding(0, 100, 100) == 2
        assert led.entries_holding(0, 101, 100) == 3
        assert led.entries_holding(3, 1, 100) == 1
        assert led.entries_holding(3, 0, 100) == 1  # no permits: still one, the caller decides
        assert led.entries_holding(0, 10_000, 100) == 10  # all there are
        assert led.entries_holding(0, 10_000, 4) == 4  # the cap
        fut = led.append(b"y", 1, 0)
        assert led.entries_holding(8, 10_000, 100) == 2  # an unconfirmed entry is not counted
        await fut
        assert led.entries_holding(8, 10_000, 100) == 3

    run_with_store(tmp_path, body)


def test_delete_ledger_and_ids_never_reused(tmp_path: Path) -> None:
    ids: list[int] = []

    async def first(store: Store) -> None:
        a = store.open_ledger("a")
        b = store.open_ledger("b")
        assert a.ledger_id != b.ledger_id
        ids.extend([a.ledger_id, b.ledger_id])
        await a.append(b"1", 1, 1)
        a.open_cursor("sub", "earliest")
        await store.delete_ledger("a")
        assert store.get_ledger("a") is None
        assert store.ledger_names() == ["b"]
        with pytest.raises(LedgerClosedError):
            a.append(b"2", 1, 1)
        a2 = store.open_ledger("a")
        assert a2.ledger_id not in ids
        ids.append(a2.ledger_id)
        await a2.append(b"fresh", 1, 1)
        await store.delete_ledger("a")

    run_with_store(tmp_path, first)

    async def second(store: Store) -> None:
        assert store.ledger_names() == ["b"]
        c = store.open_ledger("a")
        assert c.ledger_id > max(ids)
        assert c.read_entries(0, 10) == []
        assert c.cursors() == {}
        n = store._reader.execute("SELECT COUNT(*) FROM entries").fetchone()[0]  # type: ignore[union-attr]
        assert n == 0

    run_with_store(tmp_path, second)


def test_metadata(tmp_path: Path) -> None:
    async def write(store: Store) -> None:
        await store.put_metadata("partitions/t1", "4")
        await store.put_metadata("partitions/t2", "2")
        await store.put_metadata("policy/x", "y")
        await store.put_metadata("partitions/t2", None)
        assert store.get_metadata("partitions/t1") == "4"

    run_with_store(tmp_path, write)

    async def check(store: Store) -> None:
        assert store.get_metadata("partitions/t1") == "4"
        assert store.get_metadata("partitions/t2") is None
        assert store.metadata_items("partitions/") == [("partitions/t1", "4")]

    run_with_store(tmp_path, check)


@pytest.mark.parametrize("sync", ["full", "normal", "off"])
def test_sync_modes(tmp_path: Path, sync: str) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await asyncio.gather(*(led.append(b"x", 1, 1) for _ in range(10)))

    run_with_store(tmp_path, body, sync=sync)  # type: ignore[arg-type]
    run_with_store(tmp_path, lambda s: _expect_entries(s, 10))


async def _expect_entries(store: Store, n: int) -> None:
    led = store.open_ledger("t")
    assert led.last_confirmed.entry_id == n - 1


def test_closed_store_rejects_writes(tmp_path: Path) -> None:
    async def body() -> None:
        store = Store(tmp_path)
        await store.start()
        led = store.open_ledger("t")
        await store.close()
        with pytest.raises(Exception, match=r"closed|not open"):
            led.append(b"x", 1, 1)

    asyncio.run(body())


def test_appended_entry_carries_its_delivery_time_hint(tmp_path: Path) -> None:
    """The publisher's parse of deliver_at_time rides on the cached entry (the dispatcher's
    hint); an append that gives none is UNREAD, and the hint never makes entries unequal."""
    from letterbox.storage.entry import UNREAD, Entry

    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"a", 1, 1, deliver_at_time=5_000)
        await led.append(b"b", 1, 1, deliver_at_time=None)
        await led.append(b"c", 1, 1)
        hints = [e.deliver_at_time for e in led.read_entries(0, 10)]
        assert hints == [5_000, None, UNREAD]
        pos = Position(led.ledger_id, 0)
        assert Entry(pos, b"a", 1, 1, 5_000) == Entry(pos, b"a", 1, 1)

    run_with_store(tmp_path, body)


def test_reserved_appends_commit_together_and_keep_the_last_sequence_ids(tmp_path: Path) -> None:
    """reserve_append assigns ids at once; submit_appends stores them as one submission,
    and the producer sequence of each producer is the last one of the group after a restart."""

    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"first", 1, 1, producer_name="p1", sequence_id=0)
        ops = [led.reserve_append(payload(i), 1, 10 + i, "p1" if i % 2 else "p2", 100 + i) for i in range(6)]
        assert [op.entry.position.entry_id for op in ops] == [1, 2, 3, 4, 5, 6]
        assert led.last_confirmed.entry_id == 0  # nothing confirmed before the commit
        before = store.commit_count
        await submitted(led, ops)
        assert store.commit_count - before == 1
        assert led.last_confirmed.entry_id == 6
        assert [e.data for e in led.read_entries(1, 10)] == [payload(i) for i in range(6)]
        assert (led.last_sequence_id("p1"), led.last_sequence_id("p2")) == (105, 104)

    run_with_store(tmp_path, write)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert (led.last_sequence_id("p1"), led.last_sequence_id("p2")) == (105, 104)
        assert [e.data for e in led.read_entries(1, 10)] == [payload(i) for i in range(6)]

    run_with_store(tmp_path, check)
