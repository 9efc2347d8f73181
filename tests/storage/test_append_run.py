"""append_run: a producer's pass of appends as one op holding many rows (AppendRunOp)."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import payload, run_with_store, submitted

from letterbox.storage import LedgerClosedError, Store
from letterbox.storage.append_run import AppendRunOp, reserve_row
from letterbox.storage.ops import AppendOp, WriteOp, insert_entries
from letterbox.storage.schema import open_writer

LARGE = 4096


class BoomOp(WriteOp):
    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        raise RuntimeError("boom")


def test_run_holds_the_small_rows_and_a_large_entry_goes_alone(tmp_path: Path) -> None:
    """Ids in order across runs; one op per run of small entries, an AppendOp for the large
    one (payload lane), nothing confirmed or cached before the commit, all after it, the
    last sequence id stored, and the same rows read back after a restart."""
    big = payload(99, LARGE)
    datas = [payload(i) for i in range(5)] + [big] + [payload(i) for i in range(5, 8)]

    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"first", 1, 1, producer_name="p", sequence_id=0)
        ops: list[WriteOp] = []
        ids = [reserve_row(led, ops, d, 1, 10 + i, "p", 1 + i, None) for i, d in enumerate(datas)]
        assert ids == list(range(1, 10))
        assert [type(op) for op in ops] == [AppendRunOp, AppendOp, AppendRunOp]
        run = ops[0]
        assert isinstance(run, AppendRunOp)
        assert [r[1] for r in run.rows] == [1, 2, 3, 4, 5] and run.seqs == {"p": 5}
        assert led.last_confirmed.entry_id == 0 and led.read_entries(1, 20) == []
        assert led.last_pushed_sequence_id("p") == 9 and led.last_sequence_id("p") == 0
        before = store.commit_count
        await submitted(led, ops)
        assert store.commit_count - before <= 2  # the large payload may be a group apart
        assert led.last_confirmed.entry_id == 9
        entries = led.read_entries(1, 20)
        assert [e.data for e in entries] == datas
        assert [e.publish_time for e in entries] == [10 + i for i in range(9)]
        assert [e.entry_id for e in entries] == ids
        assert led.last_sequence_id("p") == 9
        assert led.count_messages(0) == 9

    run_with_store(tmp_path, write, large_payload_bytes=LARGE)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert [e.data for e in led.read_entries(1, 20)] == datas
        assert led.last_sequence_id("p") == 9

    run_with_store(tmp_path, check, large_payload_bytes=LARGE)


def test_failed_run_fails_every_row_and_gives_the_ids_back(tmp_path: Path) -> None:
    """A submission holding a run that does not commit stores none of its rows; the ledger
    takes appends again from the last committed id (here the failure is not a storage
    fault, so the ledger is fenced for good, as for a failed AppendOp)."""

    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"0", 1, 1)
        ops: list[WriteOp] = []
        for i in range(3):
            reserve_row(led, ops, payload(i), 1, 1, None, None, None)
        failing = store._submit([*ops, BoomOp()], None)
        with pytest.raises(RuntimeError, match="boom"):
            await failing
        assert led.last_confirmed.entry_id == 0
        assert [e.data for e in led.read_entries(0, 10)] == [b"0"]
        with pytest.raises(LedgerClosedError):
            reserve_row(led, [], b"x", 1, 1, None, None, None)

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.last_confirmed.entry_id == 0
        assert (await led.append(b"again", 1, 1)).entry_id == 1

    run_with_store(tmp_path, check)


def test_runs_of_two_producers_and_ledgers_commit_in_one_group(tmp_path: Path) -> None:
    """Runs submitted back to back commit together (one executemany in the fast path); each
    ledger's ids stay contiguous and each producer keeps its own last sequence id."""

    async def body(store: Store) -> None:
        a, b = store.open_ledger("a"), store.open_ledger("b")
        await asyncio.gather(a.append(b"0", 1, 1), b.append(b"0", 1, 1))
        futs = []
        for led, name in ((a, "p1"), (b, "p2"), (a, "p3")):
            ops: list[WriteOp] = []
            for i in range(100):
                reserve_row(led, ops, payload(i), 2, 1, name, i, None)
            assert len(ops) == 1
            futs.append(submitted(led, ops))
        await asyncio.gather(*futs)
        assert a.last_confirmed.entry_id == 200 and b.last_confirmed.entry_id == 100
        assert a.count_messages(0) == 400
        assert (a.last_sequence_id("p1"), a.last_sequence_id("p3"), b.last_sequence_id("p2")) == (99, 99, 99)
        assert [e.entry_id for e in a.read_entries(1, 300)] == list(range(1, 201))

    run_with_store(tmp_path, body)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 31, 63, 64, 65, 127, 128, 129, 200])
def test_insert_entries_stores_every_row_in_order(tmp_path: Path, n: int) -> None:
    """Multi-row statements (ops.insert_entries) store exactly the rows given, in order: rowids
    follow the list, payloads and payload-file names (text) kept as given."""
    conn = open_writer(tmp_path / "x.db", "off")
    rows = [(7, i, 1000 + i, 1 + i % 3, 10 + i, payload(i) if i % 5 else f"file-{i}") for i in range(n)]
    conn.execute("BEGIN")
    insert_entries(conn, rows)
    conn.execute("COMMIT")
    got = conn.execute(
        "SELECT ledger_id, entry_id, publish_time, num_messages, size, data FROM entries ORDER BY rowid").fetchall()
    assert got == rows


def test_insert_entries_refuses_a_duplicate_like_executemany(tmp_path: Path) -> None:
    """A second row for an entry id raises IntegrityError, as executemany did (the writer then
    rolls the group back and retries it per submission)."""
    conn = open_writer(tmp_path / "x.db", "off")
    rows = [(7, i, 0, 1, 1, b"x") for i in range(70)] + [(7, 3, 0, 1, 1, b"dup")]
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.IntegrityError):
        insert_entries(conn, rows)


def test_interleaved_appends_of_two_producers_are_one_run_of_consecutive_ids(tmp_path: Path) -> None:
    """Two producers' appends to one ledger, alternating, go into ONE run in arrival order;
    each producer's last sequence id is stored with it and read back after a restart."""

    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        ops: list[WriteOp] = []
        ids = [reserve_row(led, ops, payload(i), 1, 1, ("p1", "p2")[i % 2], 10 + i, None) for i in range(20)]
        assert ids == list(range(20)) and len(ops) == 1
        run = ops[0]
        assert isinstance(run, AppendRunOp) and run.seqs == {"p1": 28, "p2": 29}
        await submitted(led, ops)
        assert [e.data for e in led.read_entries(0, 50)] == [payload(i) for i in range(20)]
        assert (led.last_sequence_id("p1"), led.last_sequence_id("p2")) == (28, 29)

    run_with_store(tmp_path, write)

    async def check(store: Store) -> None:
        led = store.open_ledger("t")
        assert led.last_confirmed.entry_id == 19
        assert (led.last_sequence_id("p1"), led.last_sequence_id("p2")) == (28, 29)

    run_with_store(tmp_path, check)
