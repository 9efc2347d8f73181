"""Crash safety of large entries (payload files): kill -9 while large and small entries are
appended loses no receipted entry and leaves no payload file that no row names; kill -9
between a payload file's write and its row's commit leaves no trace of that entry."""
from __future__ import annotations

import signal
import sqlite3
import textwrap
from pathlib import Path

from storage_helpers import payload, run_printing_child, run_with_store

from letterbox.storage import Store

LARGE = 1000

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from letterbox.storage.payload_files import PayloadFiles
    from storage_helpers import append_printing_receipts, payload

    def data(i):
        return payload(i, 4000 if i % 3 else 200)  # two of three are large (>= 1,000 bytes)

    kill_at = int(sys.argv[3])
    if kill_at >= 0:  # die right after this entry's payload file is durable
        real_write = PayloadFiles.write
        def write(self, name, payload):
            real_write(self, name, payload)
            if name.startswith(f"1-{kill_at}-"):
                self.sync_directory()
                os.kill(os.getpid(), signal.SIGKILL)
        PayloadFiles.write = write

    append_printing_receipts(Path(sys.argv[1]), sys.argv[2], data, 20, large_payload_bytes=1000)
    """
)


def data(i: int) -> bytes:
    return payload(i, 4000 if i % 3 else 200)


def run_child(data_dir: Path, sync: str, kill_at: int, stop_after: int) -> list[int]:
    printed, returncode = run_printing_child(CHILD, [str(data_dir), sync, str(kill_at)], stop_after)
    assert returncode == -signal.SIGKILL
    return printed


def payload_names(data_dir: Path) -> tuple[set[str], set[str]]:
    """(files in the payload directory, files the rows name)"""
    on_disk = {p.name for p in (data_dir / "payloads").iterdir()}
    with sqlite3.connect(f"file:{data_dir / 'letterbox.db'}?mode=ro", uri=True) as db:
        named = {r[0] for r in db.execute("SELECT data FROM entries WHERE typeof(data) = 'text'")}
    return on_disk, named


def check_after_restart(data_dir: Path, printed: list[int]) -> int:
    """Every printed (receipted) entry is there with its bytes; returns the last stored id."""
    found: dict[str, int] = {}

    async def check(store: Store) -> None:
        led = store.get_ledger("crash")
        assert led is not None
        last = led.last_confirmed.entry_id
        assert last >= max(printed, default=-1)
        got = led.read_entries(0, last + 1, max_bytes=1 << 30)
        assert [e.entry_id for e in got] == list(range(last + 1))
        assert all(e.data == data(e.entry_id) for e in got)
        found["last"] = last
        on_disk, named = payload_names(data_dir)
        assert on_disk == named  # the start removed what no row names; no row lacks its file
        pos = await led.append(data(last + 1), 1, 1)  # still writable, the id follows on
        assert pos.entry_id == last + 1

    run_with_store(data_dir, check, large_payload_bytes=LARGE, cache_bytes=0)
    return found["last"]


def test_sigkill_while_appending_large_entries_loses_nothing_receipted(tmp_path: Path) -> None:
    printed = run_child(tmp_path, "full", -1, 600)
    assert len(printed) >= 600, "child died early"
    check_after_restart(tmp_path, printed)


def test_sigkill_between_payload_write_and_row_commit_leaves_no_trace(tmp_path: Path) -> None:
    kill_at = 47  # a large entry (47 % 3 != 0)
    printed = run_child(tmp_path, "full", kill_at, 10**9)  # runs until it kills itself
    assert kill_at not in printed
    orphan = [p.name for p in (tmp_path / "payloads").iterdir() if p.name.startswith(f"1-{kill_at}-")]
    assert len(orphan) == 1  # the file is there, its row never committed
    with sqlite3.connect(f"file:{tmp_path / 'letterbox.db'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM entries WHERE entry_id = ?", (kill_at,)).fetchone()[0] == 0
    last = check_after_restart(tmp_path, printed)
    assert last < kill_at  # entries commit in id order: nothing at or after the missing one
    assert not (tmp_path / "payloads" / orphan[0]).exists()
