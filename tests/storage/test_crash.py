# Crash safety: a child process appends continuously and prints every entry id whose append
# future resolved; we SIGKILL it midway and check every printed id is on disk.
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from storage_helpers import payload, run_printing_child, run_with_store

from letterbox.storage import Store

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from storage_helpers import append_printing_receipts, payload

    append_printing_receipts(Path(sys.argv[1]), sys.argv[2], lambda i: payload(i, 200), 50, ack_each_batch=True)
    """
)


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, sync: str) -> None:
    printed, _ = run_printing_child(CHILD, [str(tmp_path), sync], 3000)
    assert len(printed) >= 3000, "child died early"

    async def check(store: Store) -> None:
        led = store.get_ledger("crash")
        assert led is not None
        last = max(printed)
        assert led.last_confirmed.entry_id >= last
        got = led.read_entries(0, last + 1)
        assert [e.position.entry_id for e in got] == list(range(last + 1))
        assert all(e.data == payload(e.position.entry_id, 200) for e in got)
        assert led.last_sequence_id("p") >= last
        # store still writable after the crash
        pos = await led.append(b"after", 1, 1)
        assert pos.entry_id == led.last_confirmed.entry_id

    run_with_store(tmp_path, check)
