"""The subscription state record: delivery state persisted with the cursor, version-1
records of an older data directory still open, and acks of an atomic move that exist only
once its transaction committed."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import run_with_store

from letterbox.storage import Store
from letterbox.storage.delivery_state import DeliveryState
from letterbox.storage.ops import WriteOp
from letterbox.storage.schema import db_path


class BoomOp(WriteOp):
    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        raise RuntimeError("boom")


def test_counts_times_and_dues_survive_a_restart(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"one", 1, 1000)
        await led.append(b"batch", 4, 1000)
        c = led.open_cursor("s", "earliest")
        c.deliveries.delivered(0, 5000)
        c.deliveries.delivered(0, 6000)
        c.increment_redelivery([0, 1])
        assert not c.ack_batch_mask(1, 4, 0b0101)  # indexes 0 and 2 acked
        c.increment_redelivery([1])  # counts only the unacked indexes 1 and 3
        c.set_due(0, 99_000)
        await c.flush()

    run_with_store(tmp_path, body)

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert c.redelivery_count(0) == 1
        assert [c.redelivery_count(1, i) for i in range(4)] == [1, 2, 1, 2]
        assert c.redelivery_count(1) == 2
        assert c.deliveries.delivery_times(0) == (5000, 6000)
        assert c.deliveries.due == {0: 99_000}
        c.ack([0])
        assert c.deliveries.delivery_times(0) == (0, 0) and c.deliveries.due == {}

    run_with_store(tmp_path, reopen)


def test_a_version_1_record_still_opens(tmp_path: Path) -> None:
    async def create(store: Store) -> None:
        led = store.open_ledger("t")
        for i in range(4):
            await led.append(b"e%d" % i, 1, 1000)
        led.open_cursor("s", "earliest")
        await store.barrier()

    run_with_store(tmp_path, create)
    v1 = {"v": 1, "md": 0, "ranges": [[2, 2]], "batches": [], "props": {"x": 1}, "rc": [[1, 3], [3, 1]]}
    with sqlite3.connect(db_path(tmp_path)) as conn:  # what an older broker wrote
        conn.execute("UPDATE cursors SET state = ?", (json.dumps(v1).encode(),))

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert c.mark_delete.entry_id == 0 and c.is_acked(2) and not c.is_acked(1)
        assert c.redelivery_counts() == {1: 3, 3: 1}
        assert c.properties == {"x": 1}
        assert c.deliveries.times == {} and c.deliveries.due == {}

    run_with_store(tmp_path, reopen)


def test_a_transaction_keeps_the_delivery_state_and_acks_only_when_committed(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        for i in range(3):
            await led.append(b"e%d" % i, 1, 1000)
        c = led.open_cursor("s", "earliest")
        c.increment_redelivery([0, 1])
        c.set_due(1, 77_000)
        c.deliveries.delivered(1, 5000)
        await c.flush()
        with pytest.raises(RuntimeError, match="boom"):
            async with store.transaction() as txn:
                await txn.lock(c)
                txn.ack(c, [0])
                txn.append(led, b"x", 1, 1000)
                await _commit_with(txn, store, BoomOp())
        assert not c.is_acked(0) and c.redelivery_count(0) == 1, "a failed transaction acks nothing"
        async with store.transaction() as txn:
            await txn.lock(c)
            txn.ack(c, [0])
            await txn.commit()
        assert c.is_acked(0)

    run_with_store(tmp_path, body)

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert c.is_acked(0) and not c.is_acked(1)
        assert c.redelivery_count(1) == 1 and c.deliveries.due == {1: 77_000}
        assert c.deliveries.delivery_times(1) == (5000, 5000), "the transaction's record kept them"

    run_with_store(tmp_path, reopen)


async def _commit_with(txn: object, store: Store, extra: WriteOp) -> None:
    """Commit `txn` with one more op that fails inside the same storage transaction."""
    submit = store._submit

    def with_extra(ops: list[WriteOp], result: object) -> asyncio.Future[object]:
        return submit([*ops, extra], result)

    store._submit = with_extra  # type: ignore[method-assign,assignment]
    try:
        await txn.commit()  # type: ignore[attr-defined]
    finally:
        store._submit = submit  # type: ignore[method-assign]


def _full_rows(s: DeliveryState) -> dict[int, object]:
    """Every row the state has, made from scratch."""
    ids = set(s.counts).union(s.due, s.index_counts)
    return {e: s.row(e) for e in sorted(ids)}


def _write(table: dict[int, object], s: DeliveryState) -> None:
    """What the writer does to a cursor's rows with the changes `s` gives (delivery_rows.py)."""
    changes = s.take_changes()
    if changes is None:
        return
    if changes.replace_all:
        table.clear()
    for e in changes.deletes:
        table.pop(e, None)
    for row in changes.upserts:
        table[row[0]] = row


def test_the_rows_written_are_the_whole_state_after_any_changes() -> None:
    """Counts, backoffs, batch-index counts, forgets, jumps and seeks: after every change the
    rows written by the changes alone are exactly the rows of the whole state, also through a
    copy (a transaction's detached cursor) and after a failed write (all written again), and
    the rows read back are the same state."""
    import random

    rnd = random.Random(7)
    s = DeliveryState()
    s.durable = True
    table: dict[int, object] = {}
    ids = [rnd.randrange(0, 40_000) for _ in range(400)]
    for step in range(3000):
        e = rnd.choice(ids)
        op = rnd.random()
        if op < 0.45:
            s.delivered(e, 1_000 + step)  # times change with the count that follows
            s.increment(e)
        elif op < 0.55:
            s.set_due(e, 5_000 + step)
        elif op < 0.6:
            s.pop_due(e)
        elif op < 0.62:
            s.batch_acked(e, [0, 2])
        elif op < 0.64:
            s.lower(e, 1)
        elif op < 0.85:
            s.forget(e)
        elif op < 0.86:
            s.forget_through(rnd.randrange(0, 20_000))
        elif op < 0.865:
            s.clear_times()
        elif op < 0.87:
            s.rewrite_all()
        if step % 5 == 0:  # several changes per write, as a nack round makes
            _write(table, s)
            assert table == _full_rows(s), step
        if step % 97 == 0:
            _write(table, s)
            c = s.copy()
            c.increment(e)
            copied = dict(table)
            _write(copied, c)
            assert copied == _full_rows(c)
            loaded = DeliveryState.from_rows(table.values())  # type: ignore[arg-type]
            assert (loaded.counts, loaded.due, loaded.index_counts) == (s.counts, s.due, s.index_counts)
            assert all(loaded.times[e] == s.times[e] for e in loaded.times)
    _write(table, s)
    assert s.take_changes() is None, "nothing changed since the last write"


def test_a_delivery_alone_writes_no_row_and_a_count_writes_its_times() -> None:
    s = DeliveryState()
    s.durable = True
    s.delivered(10, 100)
    s.increment(10)
    s.delivered(5_000, 100)
    s.increment(5_000)
    first = s.take_changes()
    assert first is not None and first.upserts == [(10, 1, 100, 100, None, None), (5000, 1, 100, 100, None, None)]
    s.delivered(10, 200)
    assert s.take_changes() is None
    s.increment(5_000)  # another entry changed: only its row
    again = s.take_changes()
    assert again is not None and again.upserts == [(5000, 2, 100, 100, None, None)] and not again.deletes
    s.increment(10)  # its own count: its times go with it
    third = s.take_changes()
    assert third is not None and third.upserts == [(10, 2, 100, 200, None, None)]
    s.forget(10)
    gone = s.take_changes()
    assert gone is not None and gone.deletes == [10] and not gone.upserts


def test_a_run_of_deliveries_is_each_delivery() -> None:
    """delivered_run (the dispatcher's runs) leaves the times delivered() one by one would."""
    one, run = DeliveryState(), DeliveryState()
    for s in (one, run):
        s.delivered(3, 100)
        s.increment(3)
    for now, ids in ((200, [1, 2]), (300, [2, 3, 4]), (400, [5, 6, 7])):
        for e in ids:
            one.delivered(e, now)
        run.delivered_run(ids, now)
        assert run.times == one.times
    assert run.delivery_times(2) == (200, 300) and run.delivery_times(3) == (100, 300)
    run.forget(5)
    assert run.delivery_times(5) == (0, 0) and run.delivery_times(6) == (400, 400)
