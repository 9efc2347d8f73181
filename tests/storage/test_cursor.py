from __future__ import annotations

import asyncio
import random
from pathlib import Path

from storage_helpers import run_with_store

from letterbox.storage import ManagedLedger, Position, Store
from letterbox.storage.managed_ledger import TRIM_CHUNK_ENTRIES


async def _fill(led: ManagedLedger, n: int, num_messages: int = 1) -> None:
    await asyncio.gather(*(led.append(b"e%d" % i, num_messages, i) for i in range(n)))


def test_open_cursor_positions(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        early = led.open_cursor("early", "earliest")
        assert early.mark_delete == Position(led.ledger_id, -1)
        await _fill(led, 5)
        late = led.open_cursor("late", "latest")
        assert late.mark_delete.entry_id == 4
        assert led.open_cursor("early", "latest") is early  # existing returned unchanged
        assert set(led.cursors()) == {"early", "late"}
        assert early.backlog() == 5 and late.backlog() == 0

    run_with_store(tmp_path, body)


def test_out_of_order_acks_collapse(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 10_000)
        c = led.open_cursor("s", "earliest")
        ids = list(range(10_000))
        random.Random(7).shuffle(ids)
        for i in range(0, len(ids), 100):
            c.ack(ids[i : i + 100])
            assert len(c.individually_acked_ranges()) < 5000
        assert c.mark_delete.entry_id == 9999
        assert c.individually_acked_ranges() == []
        assert c.backlog() == 0

    run_with_store(tmp_path, body)


def test_individual_acks_and_backlog(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 20, num_messages=2)
        c = led.open_cursor("s", "earliest")
        c.ack([3, 4, 5, 10, 12, 11])
        assert c.mark_delete.entry_id == -1
        assert c.individually_acked_ranges() == [(3, 5), (10, 12)]
        assert c.is_acked(4) and not c.is_acked(6) and not c.is_acked(0)
        assert c.backlog() == 2 * (20 - 6)
        c.ack([0, 1, 2])
        assert c.mark_delete.entry_id == 5
        assert c.individually_acked_ranges() == [(10, 12)]
        c.ack_cumulative(10)
        assert c.mark_delete.entry_id == 12
        assert c.individually_acked_ranges() == []
        assert c.backlog() == 2 * 7
        c.reset(2)
        assert c.mark_delete.entry_id == 1
        assert c.backlog() == 2 * 18
        assert led.count_messages(c.mark_delete.entry_id) == 36

    run_with_store(tmp_path, body)


def test_batch_index_acks(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 3, num_messages=5)
        c = led.open_cursor("s", "earliest")
        assert c.batch_ack_set(1) is None
        assert not c.ack_batch_indexes(1, 5, [0, 2])
        assert c.batch_ack_set(1) == [0b11010]
        assert c.backlog() == 15 - 2
        assert not c.ack_batch_indexes(1, 5, [1, 3])
        assert c.batch_ack_set(1) == [0b10000]
        assert c.ack_batch_indexes(1, 5, [4])
        assert c.batch_ack_set(1) is None
        assert c.is_acked(1)
        assert c.individually_acked_ranges() == [(1, 1)]
        assert c.ack_batch_indexes(1, 5, [0])  # already acked
        assert not c.ack_batch_indexes(2, 5, [1])
        c.ack_cumulative(2)
        assert c.batch_ack_set(2) is None
        assert c.backlog() == 0

    run_with_store(tmp_path, body)


def test_cursor_state_survives_restart(tmp_path: Path) -> None:
    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 100, num_messages=3)
        c = led.open_cursor("s", "earliest")
        c.ack([0, 1, 2, 10, 11, 50, 70, 71, 72])
        c.ack_batch_indexes(20, 70, [0, 65])
        c.set_property("redeliveries", 3)
        await c.flush()
        led.open_cursor("other", "latest")  # persisted lazily; close() flushes it

    run_with_store(tmp_path, write)

    async def check(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert c.mark_delete.entry_id == 2
        assert c.individually_acked_ranges() == [(10, 11), (50, 50), (70, 72)]
        words = c.batch_ack_set(20)
        assert words is not None
        assert words[0] == -1 & ~1 and words[1] == 0b111101
        assert c.properties == {"redeliveries": 3}
        assert led.cursors()["other"].mark_delete.entry_id == 99
        await led.delete_cursor("other")

    run_with_store(tmp_path, check)

    async def check2(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        assert set(led.cursors()) == {"s"}

    run_with_store(tmp_path, check2)


def test_a_long_run_of_acked_entries_is_trimmed_in_chunks_until_all_are_gone(tmp_path: Path) -> None:
    """A trim deletes at most TRIM_CHUNK_ENTRIES entries (its transaction stays short for the
    appends committed with it); the next chunk starts once it committed, until none is left."""
    n = 2 * TRIM_CHUNK_ENTRIES + 7

    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, n)
        led.open_cursor("a", "earliest").ack_cumulative(n - 1)
        before = store.commit_count
        led.trim()
        assert led.first_position.entry_id == TRIM_CHUNK_ENTRIES  # one chunk at a time
        for _ in range(20):  # each chunk's commit starts the next on the loop
            await store.barrier()
            await asyncio.sleep(0)
            if led.first_position.entry_id == n:
                break
        await store.barrier()  # the last chunk's commit
        assert led.first_position.entry_id == n
        assert led.read_entries(0, n) == [] and led.size_bytes() == 0
        assert store.commit_count - before >= 3  # three chunks, three transactions

    run_with_store(tmp_path, body)


def test_trim_now_deletes_every_chunk_before_it_returns(tmp_path: Path) -> None:
    n = 3 * TRIM_CHUNK_ENTRIES + 1

    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, n)
        led.open_cursor("a", "earliest").ack_cumulative(n - 2)  # the last entry stays
        await led.trim_now()
        assert led.first_position.entry_id == n - 1
        assert [e.position.entry_id for e in led.read_entries(0, n)] == [n - 1]
        assert led.size_bytes() == len(b"e%d" % (n - 1))

    run_with_store(tmp_path, body)


def test_trim(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 10)
        led.trim()  # no cursors: nothing is deleted
        await store.barrier()
        assert led.first_position.entry_id == 0
        assert len(led.read_entries(0, 100)) == 10

        a = led.open_cursor("a", "earliest")
        b = led.open_cursor("b", "earliest")
        a.ack_cumulative(7)
        b.ack([0, 1, 2, 5, 6])
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 3  # min(a=7, b=2) + 1
        assert [e.position.entry_id for e in led.read_entries(0, 100)] == list(range(3, 10))
        assert led.read_entry(2) is None
        assert led.size_bytes() == sum(len(b"e%d" % i) for i in range(3, 10))

        # debounced automatic trim after mark-delete moves
        b.ack_cumulative(9)
        a.ack_cumulative(9)
        await asyncio.sleep(0.1)
        await store.barrier()
        assert led.first_position.entry_id == 10
        assert led.read_entries(0, 100) == []
        assert a.backlog() == 0
        assert await led.append(b"next", 1, 1) == Position(led.ledger_id, 10)

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.first_position.entry_id == 10
        assert led.last_confirmed.entry_id == 10
        assert [e.data for e in led.read_entries(0, 100)] == [b"next"]
        n = store._reader.execute("SELECT COUNT(*) FROM entries").fetchone()[0]  # type: ignore[union-attr]
        assert n == 1

    run_with_store(tmp_path, check)


def test_trim_all_then_restart_keeps_entry_ids(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 5)
        c = led.open_cursor("a", "earliest")
        c.ack_cumulative(4)
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 5

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.first_position.entry_id == 5
        assert led.last_confirmed.entry_id == 4
        assert (await led.append(b"x", 1, 1)).entry_id == 5

    run_with_store(tmp_path, check)


def test_atomic_multi_op_transaction(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        src = store.open_ledger("src")
        dlq = store.open_ledger("dlq")
        await _fill(src, 3)
        c = src.open_cursor("s", "earliest")
        await c.flush()
        async with store.transaction() as txn:
            await txn.lock(c)
            txn.append(dlq, b"dead", 1, 5)
            txn.ack(c, [1])
            await txn.commit()
        assert dlq.last_confirmed.entry_id == 0

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        src = store.get_ledger("src")
        dlq = store.get_ledger("dlq")
        assert src is not None and dlq is not None
        assert src.cursors()["s"].individually_acked_ranges() == [(1, 1)]
        assert [e.data for e in dlq.read_entries(0, 10)] == [b"dead"]

    run_with_store(tmp_path, check)


def test_in_order_and_mixed_acks_move_the_mark_delete_exactly(tmp_path: Path) -> None:
    """In-order acks move the mark-delete without keeping ranges; a gap keeps the later ids
    as ranges until it is filled; acks at or below the mark-delete change nothing."""

    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await _fill(led, 20)
        c = led.open_cursor("s", "earliest")
        c.ack([0, 1, 2])
        assert c.mark_delete.entry_id == 2 and c.individually_acked_ranges() == []
        c.ack([5, 6, 3, 8])
        assert c.mark_delete.entry_id == 3
        assert [(r[0], r[1]) for r in c.individually_acked_ranges()] == [(5, 6), (8, 8)]
        assert c.is_acked(6) and not c.is_acked(4) and not c.is_acked(7)
        c.ack([4, 7, 9, 2])
        assert c.mark_delete.entry_id == 9 and c.individually_acked_ranges() == []
        c.ack([1, 9])
        assert c.mark_delete.entry_id == 9 and c.backlog() == 10

    run_with_store(tmp_path, body)


def test_flush_of_a_deleted_cursor_does_not_bring_it_back(tmp_path: Path) -> None:
    # The redelivery tracker flushes a cursor after a nack's outcome is settled; the
    # subscription may be deleted (unsubscribe, admin delete) before that flush runs.
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"m", 1, 1)
        keep, gone = led.open_cursor("keep", "earliest"), led.open_cursor("gone", "earliest")
        await keep.flush()
        await gone.flush()
        await led.delete_cursor("gone")
        await gone.flush()

    run_with_store(tmp_path, body)

    async def reopened(store: Store) -> None:
        assert sorted(store.open_ledger("t").cursors()) == ["keep"], "a deleted subscription came back"

    run_with_store(tmp_path, reopened)
