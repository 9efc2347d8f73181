from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import run_with_store

from letterbox.storage import LedgerClosedError, Store
from letterbox.storage.ops import WriteOp


class BoomOp(WriteOp):
    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute("INSERT INTO metadata (key, value) VALUES ('boom', 'x')")
        raise RuntimeError("boom")


def test_failed_submission_is_isolated_and_fences_its_ledger(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        good = store.open_ledger("good")
        bad = store.open_ledger("bad")
        await asyncio.gather(good.append(b"0", 1, 1), bad.append(b"0", 1, 1))
        futs = [good.append(b"%d" % i, 1, 1) for i in range(1, 50)]
        bad_op = bad._prepare_append(b"lost", 1, 1)
        failing = store._submit([bad_op, BoomOp()], None)  # atomic: neither op commits
        futs += [good.append(b"%d" % i, 1, 1) for i in range(50, 100)]
        results = await asyncio.gather(*futs)
        assert [p.entry_id for p in results] == list(range(1, 100))
        with pytest.raises(RuntimeError, match="boom"):
            await failing
        with pytest.raises(LedgerClosedError):
            bad.append(b"x", 1, 1)
        assert store.get_metadata("boom") is None

    run_with_store(tmp_path, body)

    async def check(store: Store) -> None:
        good = store.get_ledger("good")
        bad = store.get_ledger("bad")
        assert good is not None and bad is not None
        assert good.last_confirmed.entry_id == 99
        assert bad.last_confirmed.entry_id == 0  # the failed append left no trace
        assert (await bad.append(b"again", 1, 1)).entry_id == 1
        n = store._reader.execute("SELECT COUNT(*) FROM metadata").fetchone()[0]  # type: ignore[union-attr]
        assert n == 0

    run_with_store(tmp_path, check)
