"""Redelivery counts live in the cursor record: persisted, and dropped once acked."""
from __future__ import annotations

from pathlib import Path

from storage_helpers import run_with_store

from letterbox.storage import Store


def test_counts_persist_and_vanish_on_ack(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        for i in range(6):
            await led.append(b"e%d" % i, 1, 1000 + i)
        c = led.open_cursor("s", "earliest")
        c.increment_redelivery([1, 2, 3])
        c.increment_redelivery([2])
        assert [c.redelivery_count(i) for i in range(5)] == [0, 1, 2, 1, 0]
        c.ack([3])
        await c.flush()

    run_with_store(tmp_path, body)

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert c.redelivery_counts() == {1: 1, 2: 2}
        c.ack_cumulative(1)
        assert c.redelivery_counts() == {2: 2}
        c.increment_redelivery([0])  # already acked: not counted
        assert c.redelivery_count(0) == 0

    run_with_store(tmp_path, reopen)


def test_batch_mask_acks_merge_and_complete(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        await led.append(b"batch", 130, 1000)
        c = led.open_cursor("s", "earliest")
        assert not c.ack_batch_mask(0, 130, 0b1011)
        assert c.acked_indexes(0) == frozenset({0, 1, 3})
        assert not c.ack_batch_mask(0, 130, 1 << 129)
        assert c.batch_ack_set(0) is not None
        rest = ((1 << 130) - 1) & ~(0b1011 | 1 << 129)
        assert c.ack_batch_mask(0, 130, rest)
        assert c.is_acked(0) and c.batch_ack_set(0) is None

    run_with_store(tmp_path, body)
