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


def test_retention_size_limit_deletes_oldest_acked_entries(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        now = int(time.time() * 1000)
        for i in range(10):
            await led.append(bytes([i]) * 1000, 1, now)  # 1,000 bytes each, all young
        cursor = led.open_cursor("a", "earliest")
        cursor.ack_cumulative(5)  # 0..5 acknowledged, 6..9 backlog

        led.retention_ms, led.retention_bytes = -1, 7_500  # no time limit, 7.5 kB
        led.trim()
        await store.barrier()
        # 10 kB stored: the oldest acknowledged entries go until 7.5 kB or less is left
        assert led.first_position.entry_id == 3
        assert led.read_entry(2) is None and led.read_entry(3) is not None

        led.retention_bytes = 1_000  # smaller than the backlog: only acknowledged entries go
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 6
        assert led.read_entry(6) is not None

    run_with_store(tmp_path, body)


def test_retention_time_or_size_whichever_comes_first(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        now = int(time.time() * 1000)
        for i in range(6):
            await led.append(bytes([i]) * 1000, 1, now - 3_600_000 if i < 2 else now)
        led.open_cursor("a", "earliest").ack_cumulative(5)
        led.retention_ms, led.retention_bytes = 10 * 60_000, 10_000_000
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 2  # time: the two old ones
        led.retention_bytes = 2_000
        led.trim()
        await store.barrier()
        assert led.first_position.entry_id == 4  # then size: down to 2 kB

    run_with_store(tmp_path, body)
