"""Store.transaction(): appends + acknowledgements committed together, applied in memory only
after the commit; a transaction that fails on a storage fault changes nothing and fences
nothing for good; one transaction per cursor at a time."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import run_with_store

from letterbox.storage import ManagedLedger, StorageError, Store
from letterbox.storage.entry import UNREAD
from letterbox.storage.ops import CursorWriteOp


async def _fill(led: ManagedLedger, n: int) -> None:
    await asyncio.gather(*(led.append(b"e%d" % i, 1, i) for i in range(n)))


def test_memory_changes_only_after_commit(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        src, dlq = store.open_ledger("src"), store.open_ledger("dlq")
        await _fill(src, 3)
        cursor = src.open_cursor("s", "earliest")
        async with store.transaction() as txn:
            await txn.lock(cursor)
            moved = txn.append(dlq, b"dead", 1, 5)
            txn.ack(cursor, [1])
            with pytest.raises(StorageError):
                _ = moved.position  # no id before commit
            commit = asyncio.ensure_future(txn.commit())
            await asyncio.sleep(0)  # submitted, not yet committed
            assert not cursor.is_acked(1)
            assert dlq.last_confirmed.entry_id == -1 and dlq.read_entries(0, 10) == []
            await commit
            assert cursor.is_acked(1) and moved.position.entry_id == 0
            assert [e.data for e in dlq.read_entries(0, 10)] == [b"dead"]

    run_with_store(tmp_path, body)


def test_failed_transaction_changes_nothing_and_the_ledger_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = {"disk": False}
    real_apply = CursorWriteOp.apply

    def flaky_apply(self: CursorWriteOp, conn: sqlite3.Connection, fenced: set[int]) -> None:
        if full["disk"]:
            raise sqlite3.OperationalError("database or disk is full")
        real_apply(self, conn, fenced)

    async def body(store: Store) -> None:
        src, dlq = store.open_ledger("src"), store.open_ledger("dlq")
        await _fill(src, 3)
        await dlq.append(b"first", 1, 1)
        cursor = src.open_cursor("s", "earliest")
        await cursor.flush()
        monkeypatch.setattr(CursorWriteOp, "apply", flaky_apply)
        full["disk"] = True
        with pytest.raises(StorageError, match="disk is full"):
            async with store.transaction() as txn:
                await txn.lock(cursor)
                txn.append(dlq, b"dead", 1, 5)
                txn.ack(cursor, [0, 1])
                await txn.commit()
        # nothing moved: the messages are still unacknowledged, the DLQ has its one entry
        assert not cursor.is_acked(0) and not cursor.is_acked(1)
        assert dlq.next_entry_id == 1 and [e.data for e in dlq.read_entries(0, 10)] == [b"first"]
        assert store.health.degraded and "disk is full" in store.health.describe()
        full["disk"] = False
        # not fenced for good: the next append gets the id the failed one had, contiguously
        assert (await dlq.append(b"again", 1, 6)).entry_id == 1
        assert not store.health.degraded
        async with store.transaction() as txn:  # the same move now succeeds
            await txn.lock(cursor)
            txn.append(dlq, b"dead", 1, 5)
            txn.ack(cursor, [0, 1])
            await txn.commit()
        assert cursor.is_acked(1)

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        src, dlq = store.get_ledger("src"), store.get_ledger("dlq")
        assert src is not None and dlq is not None
        assert src.cursors()["s"].mark_delete.entry_id == 1
        assert [e.data for e in dlq.read_entries(0, 10)] == [b"first", b"again", b"dead"]

    run_with_store(tmp_path, check)


def test_one_transaction_per_cursor(tmp_path: Path) -> None:
    """Two moves of the same entry: the second waits, then sees it acknowledged."""

    async def body(store: Store) -> None:
        src, dlq = store.open_ledger("src"), store.open_ledger("dlq")
        await _fill(src, 1)
        cursor = src.open_cursor("s", "earliest")

        async def move() -> bool:
            async with store.transaction() as txn:
                await txn.lock(cursor)
                if cursor.is_acked(0):
                    return False
                txn.append(dlq, b"moved", 1, 1)
                txn.ack(cursor, [0])
                await txn.commit()
                return True

        assert sorted(await asyncio.gather(move(), move())) == [False, True]
        assert dlq.next_entry_id == 1

    run_with_store(tmp_path, body)


def test_changes_need_the_cursor_locked(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        cursor = store.open_ledger("src").open_cursor("s", "earliest")
        async with store.transaction() as txn:
            with pytest.raises(StorageError, match="lock cursor"):
                txn.ack(cursor, [0])

    run_with_store(tmp_path, body)


def test_a_cancelled_caller_does_not_leave_a_committed_move_unapplied(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        src, dlq = store.open_ledger("src"), store.open_ledger("dlq")
        await _fill(src, 1)
        cursor = src.open_cursor("s", "earliest")

        async def move() -> None:
            async with store.transaction() as txn:
                await txn.lock(cursor)
                txn.append(dlq, b"moved", 1, 1)
                txn.ack(cursor, [0])
                await txn.commit()

        task = asyncio.ensure_future(move())
        for _ in range(3):  # until the commit is submitted
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await store.barrier()
        await asyncio.sleep(0)
        assert cursor.is_acked(0) and [e.data for e in dlq.read_entries(0, 10)] == [b"moved"]
        async with store.transaction() as txn:  # and the cursor was unlocked
            await asyncio.wait_for(txn.lock(cursor), 1.0)

    run_with_store(tmp_path, body)


def test_a_cursor_deleted_before_the_commit_is_not_written_back(tmp_path: Path) -> None:
    # A subscription-only redrive acks its new entry on the topic's other cursors; one of
    # them deleted while the transaction waits (its lock, here simply before commit) must
    # stay deleted: the commit must not write its state row again after the delete.
    async def body(store: Store) -> None:
        topic = store.open_ledger("src")
        await _fill(topic, 1)
        topic.open_cursor("s1", "earliest")
        other = topic.open_cursor("s2", "earliest")
        await other.flush()
        async with store.transaction() as txn:
            await txn.lock(other)
            appended = txn.append(topic, b"redriven", 1, 1)
            txn.ack_appended(other, appended)
            await topic.delete_cursor("s2")
            await txn.commit()
        assert appended.position.entry_id == 1  # the append itself committed
        assert "s2" not in topic.cursors()

    run_with_store(tmp_path, body)

    async def reopened(store: Store) -> None:
        topic = store.open_ledger("src")
        assert sorted(topic.cursors()) == ["s1"], "the deleted subscription came back after a restart"
        assert [e.data for e in topic.read_entries(0, 10)] == [b"e0", b"redriven"]

    run_with_store(tmp_path, reopened)


def test_an_append_keeps_the_delivery_time_its_caller_built_it_with(tmp_path: Path) -> None:
    """An entry appended with its delivery time known (None: it has none) is read back from
    the tail with that time, so the dispatcher does not parse its metadata; without one it
    reads as UNREAD (parse when needed)."""
    async def body(store: Store) -> None:
        dlq = store.open_ledger("dlq")
        async with store.transaction() as txn:
            txn.append(dlq, b"now", 1, 5, None)
            txn.append(dlq, b"later", 1, 5, 1234)
            txn.append(dlq, b"unknown", 1, 5)
            await txn.commit()
        assert [(e.data, e.deliver_at_time) for e in dlq.read_entries(0, 10)] == [
            (b"now", None), (b"later", 1234), (b"unknown", UNREAD)]

    run_with_store(tmp_path, body)
