# ManagedCursor: one durable subscription's acknowledgement state on a ledger.
#
# State: mark_delete (every entry <= it is acked), a RangeSet of individually acked entries
# above mark_delete, per-entry batch bitsets (bit i set == batch index i acked) for partially
# acked batches, the delivery state of unacked entries (delivery_state.py: per-message and
# per-batch-index redelivery counts -- PIP-22's "Solution 1": counts persisted with the
# cursor, so they survive reconnects and restarts --, first/last delivery times, the due
# time of each pending backoff and the attempt log of entries that failed), and a small
# `properties` map.
# Invariants (after every public mutation):
#   * every range and bitset key is > mark_delete, and no range starts at mark_delete + 1
#     (it would have been absorbed into mark_delete);
#   * an entry is never both in a range and in the bitset map.
# Persistence: every mutation marks the cursor dirty and reports it to its ledger (a callback;
# the cursor never touches the store); the Store serializes dirty cursors on the loop thread
# (next loop iteration) into ONE CursorWriteOp per cursor: the record (mark-delete, ranges,
# batches, properties: versioned JSON; records of versions 1 and 2 also held the delivery
# state and still load) and the rows of the entries whose delivery state or attempt log
# changed since the last write (delivery_rows.py, attempt_log.py), one storage transaction;
# a write that fails marks the cursor dirty again and its next write rewrites every row.
# flush() forces this and awaits durability. Mark-delete moves ask the ledger for a
# (debounced) trim.
# Transactions (transaction.py): one at a time per cursor (`txn_lock`). While one is in
# flight the cursor is not written in the background (its record is the transaction's);
# the transaction's write takes the changes made so far, and its acks are applied to this
# object only after it committed (transaction.py).
from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from . import cursor_record
from .ack_ranges import RangeSet, to_ack_set_words
from .delivery_rows import Row as DeliveryRow
from .delivery_state import DeliveryState
from .ops import CursorWriteOp, WriteOp
from .position import Position
from .range_text import RangeText

_PAST_ANY = 1 << 63


class CursorLedger(Protocol):
    """What a cursor uses of its ledger (ManagedLedger implements it)."""

    ledger_id: int
    name: str

    @property
    def last_confirmed(self) -> Position: ...

    def count_messages(self, after_entry_id: int) -> int: ...

    def messages_between(self, first: int, last: int) -> int: ...

    def _schedule_trim(self) -> None: ...

    def _cursor_clean(self, cursor: ManagedCursor) -> None: ...

    def _write(self, ops: Sequence[WriteOp]) -> asyncio.Future[None]: ...


class ManagedCursor:
    def __init__(
        self,
        ledger: CursorLedger,
        name: str,
        mark_delete_entry_id: int,
        on_dirty: Callable[[ManagedCursor], None] | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self._on_dirty = on_dirty  # told once per clean -> dirty change (schedules a write)
        self._md = mark_delete_entry_id
        self._ranges = RangeSet()
        self._range_text = RangeText()  # the ranges' JSON, cached per bucket of entry ids
        self._batches: dict[int, tuple[int, int]] = {}  # entry_id -> (batch_size, acked_mask)
        self.properties: dict[str, int] = {}
        self.deliveries = DeliveryState()
        self.deliveries.durable = self.deliveries.attempts.durable = True
        self._dirty = False
        self._deleted = False
        self._write_failures = 0  # writes of this cursor that did not commit (flush() checks)
        self.txn_lock = asyncio.Lock()  # held by the Transaction that writes this cursor

    # ---- state ----

    @property
    def mark_delete(self) -> Position:
        return Position(self.ledger.ledger_id, self._md)

    def is_acked(self, entry_id: int) -> bool:
        return entry_id <= self._md or entry_id in self._ranges

    def first_acked_from(self, entry_id: int) -> int:
        """The first acknowledged entry id >= entry_id (a number past any id if none)."""
        if entry_id <= self._md:
            return entry_id
        ranges = self._ranges
        if not ranges.starts:
            return _PAST_ANY
        i = bisect_right(ranges.ends, entry_id - 1)  # the first range ending at or after entry_id
        if i == len(ranges.starts):
            return _PAST_ANY
        return max(ranges.starts[i], entry_id)

    def has_partial_batches(self) -> bool:
        """Whether some entry is a partly acknowledged batch (batch_ack_set not None)."""
        return bool(self._batches)

    def batch_acked_indexes(self) -> dict[int, list[int]]:
        """Each partly acknowledged batch entry -> the indexes of its acknowledged messages."""
        return {e: [i for i in range(size) if mask >> i & 1] for e, (size, mask) in sorted(self._batches.items())}

    def individually_acked_ranges(self) -> list[tuple[int, int]]:
        return self._ranges.to_list()

    def batch_ack_set(self, entry_id: int) -> list[int] | None:
        b = self._batches.get(entry_id)
        if b is None:
            return None
        return to_ack_set_words(b[0], b[1])

    def redelivery_count(self, entry_id: int, batch_index: int | None = None) -> int:
        """Redeliveries of an entry's unacked messages, or of its message `batch_index`."""
        acked = False
        if batch_index is not None:
            b = self._batches.get(entry_id)
            acked = b is not None and bool(b[1] >> batch_index & 1)
        return self.deliveries.count(entry_id, batch_index, acked)

    def redelivery_counts(self) -> dict[int, int]:
        return dict(self.deliveries.counts)

    def increment_redelivery(self, entry_ids: Iterable[int]) -> None:
        """Count one more delivery of each unacked entry (of its unacked messages: the
        acked ones of a partly acked batch keep their count)."""
        is_acked = self.is_acked
        ids = [eid for eid in entry_ids if not is_acked(eid)]
        if ids:
            self.deliveries.increment_all(ids)
            self._touch()

    def set_attempts(self, entry_id: int, rows: str) -> None:
        """Store an unacked entry's attempt log (attempt_log.py; forgotten with its ack)."""
        if not self.is_acked(entry_id):
            self.deliveries.attempts.set(entry_id, rows)
            self._touch()

    def add_attempt(self, entry_id: int, row: tuple[Any, ...], limit: int) -> None:
        """Add one row to an unacked entry's attempt log (its last `limit` kept)."""
        if not self.is_acked(entry_id):
            self.deliveries.attempts.append(entry_id, row, limit)
            self._touch()

    def add_attempts(self, rows: Iterable[tuple[int, tuple[Any, ...]]], limit: int) -> None:
        """add_attempt() for many (entry id, row) pairs (one dirty report)."""
        append = self.deliveries.attempts.append
        is_acked = self.is_acked
        changed = False
        for entry_id, row in rows:
            if not is_acked(entry_id):
                append(entry_id, row, limit)
                changed = True
        if changed:
            self._touch()

    def set_due(self, entry_id: int, due_ms: int | None) -> None:
        """Record (or with None, drop) when a pending backoff of the entry ends."""
        if due_ms is None:
            if self.deliveries.pop_due(entry_id) is not None:
                self._touch()
        elif not self.is_acked(entry_id):
            self.deliveries.set_due(entry_id, due_ms)
            self._touch()

    def backlog(self) -> int:
        led = self.ledger
        lc = led.last_confirmed.entry_id
        total = led.count_messages(self._md)
        for s, e in zip(self._ranges.starts, self._ranges.ends, strict=True):
            if s > lc:
                break
            total -= led.messages_between(s, min(e, lc))
        for eid, (_size, mask) in self._batches.items():
            if eid <= lc:
                total -= mask.bit_count()
        return max(total, 0)

    # ---- mutations ----

    def ack(self, entry_ids: Iterable[int]) -> None:
        changed = False
        md = self._md
        ranges = self._ranges
        batches = self._batches
        # nothing to forget while no entry has a count, time, backoff or attempt (the happy path)
        deliveries = self.deliveries if self.deliveries.tracks_any() else None
        # ids above a gap are gathered into runs of consecutive ids, each added as one range
        first = last = -2
        for eid in entry_ids:
            if eid <= md:
                continue
            if batches:
                batches.pop(eid, None)
            if deliveries is not None:
                deliveries.forget(eid)
            if eid == md + 1 and not ranges.starts:  # in order: the mark-delete moves
                md = eid
                changed = True
                continue
            if eid == last + 1:
                last = eid
                continue
            if first >= 0:
                changed |= ranges.add_range(first, last)
            first = last = eid
        if first >= 0:
            changed |= ranges.add_range(first, last)
        if changed:
            self._set_md(ranges.absorb_from(md))
            self._touch()

    def ack_batch_indexes(
        self, entry_id: int, batch_size: int, acked_indexes: Iterable[int]
    ) -> bool:
        mask = 0
        for i in acked_indexes:
            if 0 <= i < batch_size:
                mask |= 1 << i
        return self.ack_batch_mask(entry_id, batch_size, mask)

    def ack_batch_mask(self, entry_id: int, batch_size: int, acked_mask: int) -> bool:
        """Like ack_batch_indexes, with the acked indexes as a bit mask (bit i = index i)."""
        if self.is_acked(entry_id):
            return True
        size, old = self._batches.get(entry_id, (batch_size, 0))
        full = (1 << size) - 1
        mask = old | (acked_mask & full)
        if mask != old and self.deliveries.counts:
            new = mask & ~old
            self.deliveries.batch_acked(entry_id, (i for i in range(size) if new >> i & 1))
        if mask == full:
            self.ack((entry_id,))
            return True
        if self._batches.get(entry_id) != (size, mask):
            self._batches[entry_id] = (size, mask)
            self._touch()
        return False

    def ack_cumulative(self, entry_id: int) -> None:
        if entry_id <= self._md:
            return
        md = self._ranges.absorb_from(entry_id)
        if self._batches:
            self._batches = {k: v for k, v in self._batches.items() if k > md}
        # (individual acks forget their entries one by one; a jump forgets a range)
        self.deliveries.forget_through(md)
        self._set_md(md)
        self._touch()

    def reset(self, next_entry_id: int) -> None:
        self._ranges.clear()
        self._batches.clear()
        self.deliveries.clear_times()
        self.deliveries.forget_through(next_entry_id - 1)
        self._set_md(next_entry_id - 1)
        self._touch()

    def set_property(self, key: str, value: int | None) -> None:
        """Mutate `properties` durably (direct dict edits are persisted only with the next
        other mutation or flush())."""
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = value
        self._touch()

    def acked_indexes(self, entry_id: int) -> frozenset[int]:
        """Batch indexes of a partly acknowledged entry that are acknowledged."""
        b = self._batches.get(entry_id)
        if b is None:
            return frozenset()
        size, mask = b
        return frozenset(i for i in range(size) if mask >> i & 1)

    @property
    def in_transaction(self) -> bool:
        return self.txn_lock.locked()

    async def flush(self) -> None:
        """Wait until the current state is durable: what is not written yet is written now;
        when nothing is, this waits for the writes that hold it (a write of it that failed
        meanwhile: it writes again). A deleted cursor writes nothing (its row stays deleted).
        The transaction lock is held only to submit, so flushes and moves share commits."""
        while True:
            failures = self._write_failures
            async with self.txn_lock:
                if self._deleted:
                    return
                unwritten = self._dirty or self.deliveries.has_changes() or self.deliveries.attempts.has_changes()
                if unwritten:
                    self.ledger._cursor_clean(self)
                done = self.ledger._write([self._snapshot_op()] if unwritten else [])
            await done
            if unwritten or failures == self._write_failures:
                return

    def write_now(self) -> asyncio.Future[None] | None:
        """flush() without waiting for the cursor: when no transaction holds it, its state is
        serialized and submitted at once (the background write it had scheduled is dropped:
        one record write, not two) and the returned future resolves once it is durable.
        None when a transaction holds it (or it was deleted): call flush() instead."""
        if self._deleted or self.txn_lock.locked():
            return None
        self.ledger._cursor_clean(self)
        return self.ledger._write([self._snapshot_op()])

    def write_by_caller(self) -> None:
        """The caller writes the state itself right away (a transaction that locks this
        cursor, else flush()): the background write its changes scheduled is dropped.
        Changes made meanwhile are written by that write or after it (flush, or the
        transaction's end reporting the cursor dirty again)."""
        self.ledger._cursor_clean(self)

    def detached_copy(self) -> ManagedCursor:
        """A copy whose mutations change nothing else (no dirty report, no trim)."""
        c = ManagedCursor(self.ledger, self.name, self._md)
        c._ranges = self._ranges.copy()
        c._range_text = self._range_text  # keyed by content: sharing it is safe
        c._batches = dict(self._batches)
        c.properties = dict(self.properties)
        c.deliveries = self.deliveries.copy()
        c._deleted = True  # never reported dirty
        return c

    # ---- internals ----

    def _set_md(self, md: int) -> None:
        moved_forward = md > self._md
        self._md = md
        if moved_forward and not self._deleted:
            self.ledger._schedule_trim()

    def _touch(self) -> None:
        if not self._dirty and not self._deleted:
            self._dirty = True
            if self._on_dirty is not None:
                self._on_dirty(self)

    def _snapshot_op(self) -> CursorWriteOp:
        """Serialize the record and take the rows changed since the last write into a write
        op (usable in a multi-op transaction, e.g. with an AppendOp for an atomic move)."""
        self._dirty = False
        deliveries = self.deliveries
        return CursorWriteOp(self.ledger.ledger_id, self.name, self.to_state(), self._write_failed,
                             deliveries.attempts.take_changes(), deliveries.take_changes())

    def _write_failed(self) -> None:
        """A write of this cursor did not commit: write it again, every row (the Store backs off)."""
        self._write_failures += 1
        self.deliveries.rewrite_all()
        self.deliveries.attempts.rewrite_all()
        self._touch()

    def to_state(self) -> bytes:
        # the ranges re-encoded only where they changed (range_text.py)
        return cursor_record.encode(self._md, self._batches, self.properties, self._range_text.encode(self._ranges))

    @classmethod
    def from_state(
        cls,
        ledger: CursorLedger,
        name: str,
        state: bytes,
        on_dirty: Callable[[ManagedCursor], None] | None = None,
        rows: Iterable[DeliveryRow] = (),
    ) -> ManagedCursor:
        """The cursor a record describes; `rows`: its delivery rows (an older record holds
        its delivery state itself, and rows it has are stale)."""
        record = cursor_record.parse(state, name, ledger.name)
        c = cls(ledger, name, record.md, on_dirty)
        c._ranges = RangeSet(record.ranges)
        c._batches = record.batches
        c.properties = record.props
        try:
            c.deliveries = DeliveryState.from_doc(record.doc) if record.holds_deliveries else DeliveryState.from_rows(rows)
        except (ValueError, KeyError, TypeError) as exc:
            raise cursor_record.damaged(name, ledger.name, exc) from None
        c.deliveries.durable = c.deliveries.attempts.durable = True
        return c

    def __repr__(self) -> str:
        return f"ManagedCursor({self.ledger.name!r}/{self.name!r}, md={self._md})"
