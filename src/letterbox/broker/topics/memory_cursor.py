# The cursor of a non-durable subscription (readers): same interface as the
# storage's ManagedCursor, kept only in memory and gone with the
# subscription. Individually acked ids above the mark-delete position are a
# plain set: readers rarely ack out of order.
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from letterbox.storage.delivery_state import DeliveryState
from letterbox.storage.position import Position

if TYPE_CHECKING:
    from letterbox.storage.managed_ledger import ManagedLedger


class MemoryCursor:
    def __init__(self, name: str, ledger: ManagedLedger, mark_delete_entry: int) -> None:
        self.name = name
        self.ledger = ledger
        self._md = mark_delete_entry
        self._acked: set[int] = set()
        self._batches: dict[int, set[int]] = {}
        self.deliveries = DeliveryState()

    @property
    def mark_delete(self) -> Position:
        return Position(self.ledger.ledger_id, self._md)

    def is_acked(self, entry_id: int) -> bool:
        return entry_id <= self._md or entry_id in self._acked

    def first_acked_from(self, entry_id: int) -> int:
        """The first acknowledged entry id >= entry_id (a number past any id if none)."""
        if entry_id <= self._md:
            return entry_id
        return min((e for e in self._acked if e >= entry_id), default=1 << 63)

    def has_partial_batches(self) -> bool:
        return bool(self._batches)

    def redelivery_count(self, entry_id: int, batch_index: int | None = None) -> int:
        return self.deliveries.count(entry_id, batch_index)

    def increment_redelivery(self, entry_ids: list[int]) -> None:
        for e in entry_ids:
            if not self.is_acked(e):
                self.deliveries.increment(e)

    def set_attempts(self, entry_id: int, rows: str) -> None:
        if not self.is_acked(entry_id):
            self.deliveries.attempts.set(entry_id, rows)

    def add_attempt(self, entry_id: int, row: tuple[Any, ...], limit: int) -> None:
        if not self.is_acked(entry_id):
            self.deliveries.attempts.append(entry_id, row, limit)

    def add_attempts(self, rows: Iterable[tuple[int, tuple[Any, ...]]], limit: int) -> None:
        for entry_id, row in rows:
            self.add_attempt(entry_id, row, limit)

    def set_due(self, entry_id: int, due_ms: int | None) -> None:
        if due_ms is None:
            self.deliveries.pop_due(entry_id)
        elif not self.is_acked(entry_id):
            self.deliveries.set_due(entry_id, due_ms)

    def ack(self, entry_ids: list[int]) -> None:
        for e in entry_ids:
            if e > self._md:
                self._acked.add(e)
                self._batches.pop(e, None)
                self.deliveries.forget(e)
        while self._md + 1 in self._acked:
            self._md += 1
            self._acked.discard(self._md)

    def ack_batch_indexes(self, entry_id: int, batch_size: int, acked_indexes: list[int]) -> bool:
        if self.is_acked(entry_id):
            return True
        done = self._batches.setdefault(entry_id, set())
        new = {i for i in acked_indexes if 0 <= i < batch_size} - done
        self.deliveries.batch_acked(entry_id, new)
        done.update(new)
        if len(done) >= batch_size:
            self.ack([entry_id])
            return True
        return False

    def ack_batch_mask(self, entry_id: int, batch_size: int, acked_mask: int) -> bool:
        return self.ack_batch_indexes(entry_id, batch_size, [i for i in range(batch_size) if acked_mask >> i & 1])

    def batch_ack_set(self, entry_id: int) -> list[int] | None:
        done = self._batches.get(entry_id)
        if not done:
            return None
        entry = self.ledger.read_entry(entry_id)
        size = entry.num_messages if entry is not None else max(done) + 1
        words = [0] * ((size + 63) // 64)
        for i in range(size):
            if i not in done:
                words[i >> 6] |= 1 << (i & 63)
        return [w - (1 << 64) if w >= 1 << 63 else w for w in words]

    def ack_cumulative(self, entry_id: int) -> None:
        if entry_id > self._md:
            self._md = entry_id
            self._acked = {e for e in self._acked if e > entry_id}
            self._batches = {e: s for e, s in self._batches.items() if e > entry_id}
            self.deliveries.forget_through(entry_id)
            self.ack([])

    def reset(self, next_entry_id: int) -> None:
        self._md = next_entry_id - 1
        self._acked.clear()
        self._batches.clear()
        self.deliveries.clear_times()

    def backlog(self) -> int:
        return max(0, self.ledger.count_messages(self._md) - len(self._acked))

    def acked_indexes(self, entry_id: int) -> frozenset[int]:
        return frozenset(self._batches.get(entry_id, ()))

    def write_by_caller(self) -> None:
        """Nothing is written in the background."""

    def write_now(self) -> None:
        """Nothing to write (flush() is the no-op to await)."""
        return None

    async def flush(self) -> None:
        """Nothing to persist: a non-durable cursor lives only in memory."""
