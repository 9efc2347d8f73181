"""Large entries: the payload goes to a file of its own (payload_files.py) through the payload
lane (payload_lane.py), the row names it, and every reader, trim, delete, transaction and
restart sees the same bytes as for an inline entry. The lane lets small submissions of other
ledgers pass a large one, and keeps order per ledger and across barriers."""
from __future__ import annotations

import asyncio
import errno
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import payload, run_with_store

from letterbox.storage import StorageError, Store
from letterbox.storage.entry import Entry
from letterbox.storage.errors import StorageFault
from letterbox.storage.ops import AppendOp, CursorWriteOp, WriteOp
from letterbox.storage.payload_files import PayloadFiles
from letterbox.storage.payload_lane import PayloadLane
from letterbox.storage.position import Position
from letterbox.storage.transaction import _ApplyChanges
from letterbox.storage.writer import Submission

LARGE = 1000  # the tests' threshold: entries of >= 1,000 bytes go to files


def big(i: int) -> bytes:
    return payload(i, 4000)


def rows(data_dir: Path) -> list[tuple[int, int, str, int]]:
    with sqlite3.connect(f"file:{data_dir / 'letterbox.db'}?mode=ro", uri=True) as db:
        return db.execute("SELECT ledger_id, entry_id, typeof(data), size FROM entries "
                          "ORDER BY ledger_id, entry_id").fetchall()


def files(data_dir: Path) -> set[str]:
    d = data_dir / "payloads"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def named_files(data_dir: Path) -> set[str]:
    with sqlite3.connect(f"file:{data_dir / 'letterbox.db'}?mode=ro", uri=True) as db:
        return {r[0] for r in db.execute("SELECT data FROM entries WHERE typeof(data) = 'text'")}


async def until(cond: Any, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_large_entries_are_stored_in_files_and_read_back_after_restart(tmp_path: Path) -> None:
    datas = [big(0), b"small", big(2), payload(3, LARGE - 1), payload(4, LARGE)]

    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        got = await asyncio.gather(*(led.append(d, 1, i, producer_name="p", sequence_id=i)
                                     for i, d in enumerate(datas)))
        assert [p.entry_id for p in got] == [0, 1, 2, 3, 4]
        assert [e.data for e in led.read_entries(0, 10)] == datas  # from the tail cache

    run_with_store(tmp_path, write, large_payload_bytes=LARGE)
    assert [(r[2], r[3]) for r in rows(tmp_path)] == [
        ("text", 4000), ("blob", 5), ("text", 4000), ("blob", LARGE - 1), ("text", LARGE)]
    assert files(tmp_path) == named_files(tmp_path) and len(files(tmp_path)) == 3

    async def read(store: Store) -> None:  # a new store: nothing cached, read from disk
        led = store.get_ledger("t")
        assert led is not None
        assert [e.data for e in led.read_entries(0, 10)] == datas
        assert led.read_entry(2) is not None and led.read_entry(2).data == big(2)  # type: ignore[union-attr]
        assert led.last_sequence_id("p") == 4 and led.size_bytes() == sum(map(len, datas))

    run_with_store(tmp_path, read, large_payload_bytes=LARGE, cache_bytes=0)


def test_trim_and_ledger_delete_remove_the_payload_files(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        cursor = led.open_cursor("s", "earliest")
        await asyncio.gather(*(led.append(big(i), 1, i) for i in range(3)))
        assert len(files(tmp_path)) == 3
        cursor.ack_cumulative(1)
        led.trim()
        await store.barrier()
        await until(lambda: len(files(tmp_path)) == 1, "the trimmed entries' files to go")
        assert files(tmp_path) == named_files(tmp_path)
        assert led.read_entry(2) is not None and led.read_entry(2).data == big(2)  # type: ignore[union-attr]
        other = store.open_ledger("other")
        await other.append(big(9), 1, 9)
        await store.delete_ledger("t")
        await until(lambda: len(files(tmp_path)) == 1, "the deleted ledger's files to go")
        assert files(tmp_path) == named_files(tmp_path)

    run_with_store(tmp_path, body, large_payload_bytes=LARGE)


def test_a_large_entry_moves_in_a_transaction(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        src, dlq = store.open_ledger("src"), store.open_ledger("dlq")
        await src.append(big(0), 1, 1)
        cursor = src.open_cursor("s", "earliest")
        entry = src.read_entry(0)
        assert entry is not None
        async with store.transaction() as txn:
            await txn.lock(cursor)
            moved = txn.append(dlq, entry.data, 1, 2)
            txn.ack(cursor, [0])
            await txn.commit()
        assert moved.position.entry_id == 0 and cursor.is_acked(0)

    run_with_store(tmp_path, body, large_payload_bytes=LARGE)
    assert len(files(tmp_path)) == 2 and files(tmp_path) == named_files(tmp_path)

    async def check(store: Store) -> None:
        dlq, src = store.get_ledger("dlq"), store.get_ledger("src")
        assert dlq is not None and src is not None
        assert [e.data for e in dlq.read_entries(0, 10)] == [big(0)]
        assert src.cursors()["s"].is_acked(0)

    run_with_store(tmp_path, check, large_payload_bytes=LARGE, cache_bytes=0)


def test_a_payload_that_cannot_be_written_fails_its_append_and_the_ledger_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = {"disk": True}
    real_write = PayloadFiles.write

    def write(self: PayloadFiles, name: str, data: bytes) -> None:
        real_write(self, name, data)  # a partial file is left behind, as on a full disk
        if full["disk"]:
            raise OSError(errno.ENOSPC, "No space left on device")

    async def body(store: Store) -> None:
        led, other = store.open_ledger("t"), store.open_ledger("other")
        await led.append(b"first", 1, 1)
        failing = led.append(big(1), 1, 1)
        behind = led.append(b"behind", 1, 1)  # after the failed one: must not commit
        monkeypatch.setattr(PayloadFiles, "write", write)
        results = await asyncio.gather(failing, behind, return_exceptions=True)
        assert isinstance(results[0], StorageFault) and "payload file" in str(results[0])
        assert isinstance(results[1], StorageError)
        assert (await other.append(b"fine", 1, 1)).entry_id == 0  # other ledgers unaffected
        full["disk"] = False
        deadline = time.monotonic() + 30
        while True:  # LedgerRecovering until the failed ids were given back
            try:
                pos = await led.append(big(5), 1, 1)
                break
            except StorageError:
                assert time.monotonic() < deadline, "the ledger never recovered"
                await asyncio.sleep(0.01)
        assert pos.entry_id == 1
        assert [e.data for e in led.read_entries(0, 10)] == [b"first", big(5)]
        await until(lambda: files(tmp_path) == named_files(tmp_path), "the failed payload's file to go")

    run_with_store(tmp_path, body, large_payload_bytes=LARGE)
    assert len(files(tmp_path)) == 1


def test_start_removes_payload_files_no_row_names(tmp_path: Path) -> None:
    async def write(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(big(0), 1, 1)

    run_with_store(tmp_path, write, large_payload_bytes=LARGE)
    (kept,) = files(tmp_path)
    lid, eid, _ = kept.split("-", 2)
    d = tmp_path / "payloads"
    for orphan in (f"{lid}-{eid}-000000000000.payload", f"{lid}-7-0123456789ab.payload",
                   "99-0-abcdef.payload", "stray.tmp"):
        (d / orphan).write_bytes(b"x" * 10)

    async def check(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        assert files(tmp_path) == {kept}
        assert [e.data for e in led.read_entries(0, 10)] == [big(0)]

    run_with_store(tmp_path, check, large_payload_bytes=LARGE, cache_bytes=0)


def test_a_missing_payload_file_is_a_storage_fault_not_an_empty_entry(tmp_path: Path) -> None:
    async def write(store: Store) -> None:
        await store.open_ledger("t").append(big(0), 1, 1)

    run_with_store(tmp_path, write, large_payload_bytes=LARGE)
    (name,) = files(tmp_path)

    async def check(store: Store) -> None:
        (tmp_path / "payloads" / name).unlink()
        led = store.get_ledger("t")
        assert led is not None
        with pytest.raises(StorageFault, match=name):
            led.read_entries(0, 10)

    run_with_store(tmp_path, check, large_payload_bytes=LARGE, cache_bytes=0)


class _GatedFiles(PayloadFiles):
    """Payload writes wait until the test opens the gate."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, large_bytes=LARGE)
        self.gate = threading.Event()

    def write(self, name: str, data: bytes) -> None:
        assert self.gate.wait(30), "the test never opened the gate"
        super().write(name, data)


def test_the_lane_passes_small_submissions_of_other_ledgers_and_keeps_order(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    forwarded: list[Submission] = []
    files_ = _GatedFiles(tmp_path / "payloads")
    lane: PayloadLane[Submission] = PayloadLane(files_, forwarded.append)
    lane.start()

    def sub(*ops: WriteOp) -> Submission:
        return Submission(list(ops), loop.create_future(), None)

    def append(ledger_id: int, entry_id: int, data: bytes) -> AppendOp:
        return AppendOp(Any, Entry(Position(ledger_id, entry_id), data, 1, 1), None, None)  # type: ignore[arg-type]

    try:
        flood = sub(append(1, 0, big(0)))  # large: to the lane thread (blocked on the gate)
        healthy = sub(append(2, 0, b"small"))  # another ledger: straight to the writer
        behind = sub(append(1, 1, b"small"))  # the flood's ledger: after its large entry
        cursor = sub(CursorWriteOp(2, "c", b"{}"), _ApplyChanges([]))  # a transaction of ledger 2
        barrier = sub()  # store.barrier(): after everything before it
        after_barrier = sub(append(2, 1, b"small"))  # everything follows a barrier in the lane
        for s in (flood, healthy, behind, cursor, barrier, after_barrier):
            lane.submit(s)
        assert forwarded == [healthy, cursor]
        files_.gate.set()
        deadline = time.monotonic() + 30
        while len(forwarded) < 6:
            assert time.monotonic() < deadline, f"only {len(forwarded)} forwarded"
            time.sleep(0.01)
        assert forwarded == [healthy, cursor, flood, behind, barrier, after_barrier]
        op = flood.ops[0]
        assert isinstance(op, AppendOp) and op.payload_ref is not None
        assert (tmp_path / "payloads" / op.payload_ref).read_bytes() == big(0)
        assert flood.nbytes == 0  # no longer part of a group commit's bytes
        lane.submit(late := sub(append(1, 2, b"small")))  # the lane is empty again: direct
        assert forwarded[-1] is late
    finally:
        files_.gate.set()
        lane.stop()
        loop.close()
