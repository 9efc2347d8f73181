"""Counts given back (DeliveryState.lower: the circuit breaker's trip): lowered, dropped at 0, batch-index counts never above the entry's, the
rows written equal to the whole state's, and the lowered counts durable."""
from __future__ import annotations

from pathlib import Path

from storage_helpers import run_with_store
from test_delivery_state import _full_rows, _write

from letterbox.storage import Store
from letterbox.storage.delivery_state import DeliveryState


def test_lower_drops_to_zero_and_keeps_the_rows_exact() -> None:
    s = DeliveryState()
    s.durable = True
    table: dict[int, object] = {}
    for e in (3, 700, 701):
        for _ in range(3):
            s.increment(e)
    s.batch_acked(700, [1])
    _write(table, s)
    assert table == _full_rows(s)
    s.lower(3, 2)
    s.lower(700, 5)
    s.lower(701, 0)
    s.lower(9, 1)  # never counted: nothing
    assert (s.count(3), s.count(700), s.count(701)) == (1, 0, 3)
    assert 700 not in s.counts and s.count(700, 1) == 0
    _write(table, s)
    assert table == _full_rows(s)


def test_lowered_counts_survive_a_restart(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        for _ in range(2):
            await led.append(b"m", 1, 1000)
        c = led.open_cursor("s", "earliest")
        c.increment_redelivery([0, 1])
        c.increment_redelivery([0, 1])
        await c.flush()
        c.deliveries.lower(0, 2)  # as the redelivery tracker does, then its record write
        c.deliveries.lower(1, 1)
        written = c.write_now()
        assert written is not None
        await written

    run_with_store(tmp_path, body)

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert (c.redelivery_count(0), c.redelivery_count(1)) == (0, 1)

    run_with_store(tmp_path, reopen)
