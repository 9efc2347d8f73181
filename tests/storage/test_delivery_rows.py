"""The delivery state in rows of its own (delivery_rows.py): a write carries the rows that
changed and never the whole state; the rows survive a kill -9 whenever their write
committed, transactions included; and a data dir whose cursor records still hold the
delivery state (version 2, before the rows) opens with its counts, times and backoffs
and moves them into rows with its next write."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from storage_helpers import run_printing_child, run_with_store

from letterbox.storage import Store
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.storage.managed_ledger import ManagedLedger
from letterbox.storage.ops import WriteOp
from letterbox.storage.schema import db_path

ENTRIES = 300


@dataclass(frozen=True)
class Session:
    """One store session on the data dir: ledger "t" and its subscription "s"."""

    store: Store
    ledger: ManagedLedger
    cursor: ManagedCursor


Body = Callable[[Session], Awaitable[None]]


class DataDir:
    """A data dir for these tests: `write` runs the first session (`entries` messages on "t",
    subscription "s" from the earliest, durable before `body` runs), `reopen` a later one on
    what the earlier sessions left; `rows` and `record` read the database between sessions."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entries: int, body: Body | None = None) -> None:
        async def session(store: Store) -> None:
            led = store.open_ledger("t")
            for _ in range(entries):
                await led.append(b"m", 1, 1000)
            c = led.open_cursor("s", "earliest")
            await store.barrier()
            if body is not None:
                await body(Session(store, led, c))

        run_with_store(self.path, session)

    def reopen(self, body: Body) -> None:
        async def session(store: Store) -> None:
            led = store.get_ledger("t")
            assert led is not None
            c = led.cursors()["s"]
            assert isinstance(c, ManagedCursor)
            await body(Session(store, led, c))

        run_with_store(self.path, session)

    def rows(self) -> dict[int, tuple[object, ...]]:
        with sqlite3.connect(db_path(self.path)) as conn:
            return {int(r[0]): tuple(r[1:]) for r in conn.execute(
                "SELECT entry_id, count, first_ms, last_ms, due_ms, index_counts FROM deliveries ORDER BY entry_id")}

    def record(self) -> dict[str, object]:
        with sqlite3.connect(db_path(self.path)) as conn:
            (state,) = conn.execute("SELECT state FROM cursors WHERE name = 's'").fetchone()
        return dict(json.loads(bytes(state)))


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path)


def test_a_write_carries_only_the_rows_that_changed(data: DataDir) -> None:
    async def body(s: Session) -> None:
        c = s.cursor
        c.deliveries.delivered_run(list(range(ENTRIES)), 5000)
        c.increment_redelivery(range(ENTRIES))
        await c.flush()
        c.increment_redelivery([7, 8])
        c.ack([9])
        op = c._snapshot_op()
        assert op.deliveries is not None
        assert [r[:2] for r in op.deliveries.upserts] == [(7, 2), (8, 2)] and op.deliveries.deletes == [9]
        assert not op.deliveries.replace_all
        assert b'"c"' not in op.state, "the record holds no counts"
        await s.ledger._write([op])

    data.write(ENTRIES, body)
    rows = data.rows()
    assert len(rows) == ENTRIES - 1 and 9 not in rows
    assert rows[7] == (2, 5000, 5000, None, None) and rows[10] == (1, 5000, 5000, None, None)
    assert data.record()["v"] == 3

    async def reopened(s: Session) -> None:
        c = s.cursor
        assert c.redelivery_counts() == {e: 2 if e in (7, 8) else 1 for e in range(ENTRIES) if e != 9}
        assert c.deliveries.delivery_times(7) == (5000, 5000)

    data.reopen(reopened)


# The child: rounds of counts, a move (one transaction: an append to "dlq" and the ack of the
# round's entry) and a plain ack, each round durable before its number is printed. As in the
# redelivery tracker, the counts are written at once (odd rounds) or by the move that follows
# them (even rounds: the transaction's write holds them).
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from letterbox.storage import Store

    async def main():
        store, n = Store(Path(sys.argv[1]), sync="full"), int(sys.argv[2])
        await store.start()
        led, dlq = store.open_ledger("t"), store.open_ledger("dlq")
        for i in range(n):
            led.append(b"m", 1, 1000)
        c = led.open_cursor("s", "earliest")
        await store.barrier()
        r = 0
        while True:
            r += 1
            c.increment_redelivery([e for e in range(n) if e % (r % 7 + 2) == 0])
            if r % 2:
                await c.write_now()
            else:
                c.write_by_caller()
            async with store.transaction() as txn:
                await txn.lock(c)
                txn.append(dlq, b"x", 1, 1000)
                txn.ack(c, [r])
                await txn.commit()
            c.ack([n - r])
            await c.flush()
            print(r, flush=True)

    asyncio.run(main())
    """
)


def _expected(rounds: int, next_counted: bool = False) -> dict[int, int]:
    """The counts after `rounds` rounds; `next_counted`: with the next round's increments
    committed and nothing of its move or ack (an odd round writes its counts first)."""
    counts: dict[int, int] = {}
    acked: set[int] = set()
    for r in range(1, rounds + 1 + next_counted):
        for e in range(ENTRIES):
            if e % (r % 7 + 2) == 0 and e not in acked:
                counts[e] = counts.get(e, 0) + 1
        if r <= rounds:
            for e in (r, ENTRIES - r):
                acked.add(e)
                counts.pop(e, None)
    return counts


def test_counts_written_as_rows_survive_a_kill_9(data: DataDir) -> None:
    printed, _ = run_printing_child(CHILD, [str(data.path), str(ENTRIES)], 40)
    assert len(printed) >= 40, "child died early"
    last = max(printed)

    async def check(s: Session) -> None:
        c, dlq = s.cursor, s.store.get_ledger("dlq")
        assert dlq is not None
        # every printed round is durable; the round after it may have committed in part
        rounds = last + 1 if c.is_acked(last + 1) else last
        expected = _expected(rounds)
        if rounds == last and (last + 1) % 2:  # an odd round writes its counts before its move
            assert c.redelivery_counts() in (expected, _expected(last, next_counted=True))
        elif c.is_acked(ENTRIES - rounds) or rounds == last:
            assert c.redelivery_counts() == expected
        else:  # its move committed, its plain ack not yet
            assert c.redelivery_counts() == {**expected, ENTRIES - rounds: c.redelivery_count(ENTRIES - rounds)}
        assert dlq.last_confirmed.entry_id + 1 == rounds, "one dead letter per committed move"

    data.reopen(check)


def test_a_data_dir_with_version_2_records_opens_and_moves_to_rows(data: DataDir) -> None:
    data.write(6)
    # what a broker before the rows wrote: the delivery state inside the record, no table
    v2 = {"v": 2, "md": 0, "batches": [[4, 3, 1]], "props": {"p": 5}, "ranges": [[2, 2]],
          "c": [1, 3, 4, 2], "ic": [[4, [[0, 1]]]], "t": [1, 100, 200, 4, 300, 400, 5, 500, 600],
          "d": [5, 99_000]}
    with sqlite3.connect(db_path(data.path)) as conn:
        conn.execute("DROP TABLE deliveries")
        conn.execute("UPDATE cursors SET state = ?", (json.dumps(v2, separators=(",", ":")).encode(),))

    def same(c: ManagedCursor) -> None:
        assert c.mark_delete.entry_id == 0 and c.is_acked(2) and not c.is_acked(1)
        assert c.properties["p"] == 5 and c.batch_acked_indexes() == {4: [0]}
        assert c.redelivery_counts() == {1: 3, 4: 2}
        assert [c.redelivery_count(4, i) for i in range(3)] == [1, 2, 2]
        assert [c.deliveries.delivery_times(e) for e in (1, 4, 5)] == [(100, 200), (300, 400), (500, 600)]
        assert c.deliveries.due == {5: 99_000}

    async def first(s: Session) -> None:
        same(s.cursor)
        s.cursor.set_property("q", 1)  # any write moves the whole delivery state into rows
        await s.cursor.flush()

    data.reopen(first)
    record = data.record()
    assert record["v"] == 3 and not {"c", "ic", "t", "d"} & set(record)
    assert data.rows() == {1: (3, 100, 200, None, None), 4: (2, 300, 400, None, "[[0,1]]"),
                           5: (0, 500, 600, 99_000, None)}

    async def again(s: Session) -> None:
        same(s.cursor)
        assert s.cursor.properties == {"p": 5, "q": 1}

    data.reopen(again)


class _BoomOp(WriteOp):
    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        raise RuntimeError("boom")


def test_flush_writes_only_what_is_unwritten_and_again_after_a_failed_write(data: DataDir) -> None:
    async def body(s: Session) -> None:
        store, c = s.store, s.cursor
        await c.flush()
        ops: list[list[WriteOp]] = []
        submit = store._submit

        def recording(batch: list[WriteOp], result: object, boom: bool = False) -> asyncio.Future[object]:
            ops.append(list(batch))
            return submit([*batch, _BoomOp()] if boom else batch, result)

        store._submit = recording  # type: ignore[method-assign,assignment]
        await c.flush()  # nothing unwritten: it waits for what holds the state, writes nothing
        assert ops == [[]]
        c.increment_redelivery([1])
        store._submit = lambda b, r: recording(b, r, boom=True)  # type: ignore[method-assign,assignment,misc]
        failing = c.write_now()  # its write will not commit
        assert failing is not None
        store._submit = recording  # type: ignore[method-assign,assignment]
        await c.flush()  # nothing unwritten when it began, but the write it waited for failed
        with pytest.raises(RuntimeError, match="boom"):
            await failing
        assert data.rows() == {1: (1, None, None, None, None)}, "durable when flush() returned"
        assert ops[-1] == [] and ["CursorWriteOp"] in [[type(op).__name__ for op in b] for b in ops[2:]]
        store._submit = submit  # type: ignore[method-assign]

    data.write(3, body)
    assert data.rows() == {1: (1, None, None, None, None)}


def test_a_deleted_subscription_leaves_no_rows_for_one_of_the_same_name(data: DataDir) -> None:
    async def body(s: Session) -> None:
        c = s.cursor
        c.increment_redelivery([0, 1])
        await c.flush()
        await s.ledger.delete_cursor("s")
        again = s.ledger.open_cursor("s", "earliest")
        assert again.redelivery_counts() == {}
        await again.flush()

    data.write(3, body)
    assert data.rows() == {}

    async def reopened(s: Session) -> None:
        assert s.cursor.redelivery_counts() == {}

    data.reopen(reopened)
