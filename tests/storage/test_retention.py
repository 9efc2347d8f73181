"""Retention: acknowledged entries are kept for the ledger's retention time."""
from __future__ import annotations

import time
from pathlib import Path

from storage_helpers import run_with_store

from letterbox.storage import Store


def test_retention_keeps_young_acked_entries(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        now = int(time.time() * 1000)
        # five entries published an hour ago, five just now
        for i in range(10):
            await led.append(b"e%d" % i, 1, now - 3_600_000 if i < 5 else now)
        cursor = led.open_cursor("a", "earliest")
        cursor.ack_cumulative(9)

        led.retention_ms = -1  # forever: nothing goes
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 0

        led.retention_ms = 10 * 60_000  # ten minutes: the hour-old entries go
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 5
        assert led.read_entry(4) is None and led.read_entry(5) is not None

        led.retention_ms = 0  # no retention: everything acked goes
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 10

    run_with_store(tmp_path, body)
