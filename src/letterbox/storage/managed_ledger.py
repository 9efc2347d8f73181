# ManagedLedger: one topic partition's append-only log of entries plus its cursors.
#
# In-memory state (all owned by the event-loop thread):
#   _next  next entry id to assign (ids are assigned synchronously in append() call order)
#   _lc    last confirmed (durable) entry id; advanced only from writer completions, in order
#   _first first entry id still stored (trim watermark; trim only ever moves it forward)
#   counts messages per entry as prefix sums (message_counts.py); covers appended-but-
#          unconfirmed entries too; queries clamp to _lc.
#   _cache contiguous tail of recent committed rows (shared, bounded EntryCache in the Store)
#   _seq / _pushed_seq  durable / in-flight last sequence id per producer
# Invariants: _first <= _lc + 1 <= _next; stored entry ids are exactly [_first, _lc] (plus
# in-flight ones); reads never return entries > _lc or < _first; the tail cache holds only
# committed entries (added on commit).
# A failed append (storage fault: disk full, I/O error, read-only) does not close the ledger:
# the writer fences it so no later append commits after the gap, new appends are refused
# (LedgerRecovering) until every append in flight has failed too, then the ledger gives the
# ids back (_next = _lc + 1) and is unfenced. Any other failure (a bug, a UNIQUE conflict of
# a second writer) fences it for good.
from __future__ import annotations

import asyncio
import logging
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from letterbox.clock import wall_ms

from .cache import LedgerCache, Row
from .delivery_rows import Row as DeliveryRow
from .entry import UNREAD, Entry
from .errors import LedgerClosedError, LedgerRecovering, StorageError, is_storage_fault
from .ledger_reads import LedgerReads
from .ledger_store import LedgerStore
from .managed_cursor import ManagedCursor
from .message_counts import MessageCounts
from .ops import AppendOp, CreateLedgerOp, DeleteCursorOp, Then, TrimOp, UnfenceOp, WriteOp
from .position import Position
from .retention import retention_cut

# Entries one trim deletes at most. A trim is a statement of a writer transaction, and the
# appends committed with it wait for it (milliseconds for a few thousand entries), so
# a long run of acknowledged entries goes in chunks, each started once the one before committed.
TRIM_CHUNK_ENTRIES = 500

log = logging.getLogger(__name__)


class ManagedLedger(LedgerReads):
    def __init__(
        self,
        store: LedgerStore,
        name: str,
        ledger_id: int,
        *,
        first_entry_id: int = 0,
        next_entry_id: int = 0,
        cum_messages: array[int] | None = None,
        size_bytes: int = 0,
        sequences: dict[str, int] | None = None,
        created: bool = True,
    ) -> None:
        self._store = store
        # "now" of retention by time: the broker sets its clock here (letterbox/clock.py)
        self.clock_ms: Callable[[], int] = wall_ms
        self.name = name
        self.ledger_id = ledger_id
        self._first = first_entry_id
        self._next = next_entry_id
        self._lc = next_entry_id - 1
        self.counts = MessageCounts(first_entry_id, cum_messages)
        self._size = size_bytes
        self._seq: dict[str, int] = dict(sequences or {})
        # how long acknowledged entries are kept: 0 = delete once every cursor acked
        # them, -1 = keep forever, n > 0 = keep for n milliseconds after publishing
        self.retention_ms = 0
        self.retention_bytes = -1  # no size limit
        self.replay_ms = 0  # no replay window (retention.py); the broker sets its own
        self.replay_entries = 0
        self._pushed_seq: dict[str, int] = dict(self._seq)
        self._cursors: dict[str, ManagedCursor] = {}
        self._listeners: list[Callable[[Position], None]] = []
        self._cache = LedgerCache(next_entry_id)
        self._trim_handle: asyncio.TimerHandle | None = None
        self._closed_reason: str | None = None
        self._created = created  # the ledger's row is stored
        self._inflight = 0  # appends submitted, not yet committed or failed
        self._failed: BaseException | None = None  # a storage fault, until the ids are given back

    # ---- positions & stats ----

    @property
    def last_confirmed(self) -> Position:
        return Position(self.ledger_id, self._lc)

    @property
    def first_position(self) -> Position:
        return Position(self.ledger_id, self._first)

    @property
    def next_entry_id(self) -> int:
        return self._next

    def size_bytes(self) -> int:
        return self._size

    def messages_between(self, first: int, last: int) -> int:
        """Messages in entries [first, last] (caller clamps last to the last confirmed id)."""
        return self.counts.between(first, last)

    def count_messages(self, after_entry_id: int) -> int:
        return self.counts.between(max(after_entry_id + 1, self._first), self._lc)

    # ---- appends ----

    def append(
        self,
        data: bytes,
        num_messages: int,
        publish_time: int,
        producer_name: str | None = None,
        sequence_id: int | None = None,
        deliver_at_time: int | None = UNREAD,
    ) -> asyncio.Future[Position]:
        """Assign the next entry id now; the future resolves when the entry is durable.
        Raises LedgerClosedError / StoreClosedError / LedgerRecovering synchronously if
        writing is impossible now."""
        op = self._prepare_append(data, num_messages, publish_time, producer_name, sequence_id, deliver_at_time)
        return self._store._submit([*self._create_ops(), op], op.entry.position)

    def submit_appends(self, ops: Sequence[WriteOp], then: Then) -> None:
        """Store reserved appends (all, in order, before anything else for this ledger)
        atomically; `then` hears the outcome (None, or the error) in the callback that learns it."""
        self._store._submit_then([*self._create_ops(), *ops], then)

    def _create_ops(self) -> list[WriteOp]:
        """The ledger's row, until it is stored (rides along with appends; idempotent)."""
        return [] if self._created else [CreateLedgerOp(self.name, self.ledger_id, self._first, ledger=self)]

    def _on_created(self) -> None:
        self._created = True

    def check_appendable(self) -> None:
        """Raise if the ledger cannot take an append now: LedgerClosedError (closed, fenced,
        deleted), LedgerRecovering (failed appends are being given back), StoreClosedError."""
        if self._closed_reason is not None:
            raise LedgerClosedError(f"ledger {self.name!r} is {self._closed_reason}")
        if self._failed is not None:
            raise LedgerRecovering(f"ledger {self.name!r}: storage write failed ({self._failed}); retrying")
        self._store._check_open()

    def _prepare_append(self, data: bytes, num_messages: int, publish_time: int, producer_name: str | None = None,
                        sequence_id: int | None = None, deliver_at_time: int | None = UNREAD) -> AppendOp:
        """Assign an id and build the AppendOp; Transaction, append() or submit_appends stores it."""
        eid = self.reserve_entry_id(num_messages, producer_name, sequence_id)
        entry = Entry(Position(self.ledger_id, eid), bytes(data), num_messages, publish_time, deliver_at_time)
        self._inflight += 1
        return AppendOp(self, entry, producer_name, sequence_id)

    def reserve_entry_id(self, num_messages: int, producer_name: str | None, sequence_id: int | None) -> int:
        """The next entry id, for an AppendOp or an AppendRunOp row (the caller counts its append
        in flight); nothing is reserved when the ledger cannot append or num_messages < 1."""
        self.check_appendable()
        if num_messages < 1:
            raise ValueError("num_messages must be >= 1")
        eid = self._next
        self._next = eid + 1
        self.counts.add(num_messages)
        if producer_name is not None and sequence_id is not None:
            self._pushed_seq[producer_name] = sequence_id
        return eid

    reserve_append = _prepare_append  # an entry id now, stored later by submit_appends

    def _cancel_append(self, op: AppendOp) -> None:
        """Give back the id of the last reserved append, never submitted (a transaction
        whose later append could not be prepared)."""
        assert op.entry.position.entry_id == self._next - 1
        self._next -= 1
        self.counts.pop()
        self._inflight -= 1

    def on_rows_committed(self, rows: Sequence[Row], delivers: Sequence[int | None], nbytes: int,
                          seqs: Iterable[tuple[str, int]] = ()) -> None:
        """Loop thread: one in-flight append of this ledger is durable (an AppendOp, or an
        AppendRunOp's rows): they join the tail cache as they are."""
        self._inflight -= 1
        if not rows:
            return
        self._store._cache.add_rows(self._cache, rows, delivers, nbytes)
        last = rows[-1][1]
        if last > self._lc:
            self._lc = last
        self._size += nbytes
        for producer_name, sequence_id in seqs:
            self._seq[producer_name] = sequence_id

    def _on_append_failed(self, exc: BaseException) -> None:
        self._inflight -= 1
        if self._failed is None and self._closed_reason is None:
            if not is_storage_fault(exc):
                log.error("ledger %s fenced after failed append: %s", self.name, exc)
                self._closed_reason = "fenced"
                return
            self._failed = exc
            self._store._storage_fault(exc)
        if self._failed is not None and self._inflight == 0:
            self._give_back_ids()

    def _give_back_ids(self) -> None:
        """Every append after the last committed one failed: forget them and let appends
        commit again from _lc + 1 (the UnfenceOp is queued before any new append)."""
        self._next = self._lc + 1
        self.counts.truncate(self._next)
        self._pushed_seq = dict(self._seq)
        self._failed = None
        try:
            self._store._submit_background([UnfenceOp(self.ledger_id)])
        except StorageError:  # the store is closing: no append follows anyway
            self._closed_reason = "closed"

    def _notify_confirmed(self) -> None:
        pos = self.last_confirmed
        for cb in list(self._listeners):
            try:
                cb(pos)
            except Exception:
                log.exception("confirm listener failed for ledger %s", self.name)

    def last_sequence_id(self, producer_name: str) -> int:
        """Last DURABLE sequence id of the producer (-1 if unknown)."""
        return self._seq.get(producer_name, -1)

    def last_pushed_sequence_id(self, producer_name: str) -> int:
        """Last sequence id appended, including appends not yet durable (for dedup checks);
        while failed appends are being given back, the last durable one."""
        if self._failed is not None:
            return self._seq.get(producer_name, -1)
        return self._pushed_seq.get(producer_name, -1)

    def add_confirm_listener(self, cb: Callable[[Position], None]) -> None:
        self._listeners.append(cb)

    def remove_confirm_listener(self, cb: Callable[[Position], None]) -> None:
        if cb in self._listeners:
            self._listeners.remove(cb)

    # ---- cursors ----

    def cursors(self) -> dict[str, ManagedCursor]:
        return dict(self._cursors)

    def open_cursor(
        self, name: str, initial_position: Literal["earliest", "latest"]
    ) -> ManagedCursor:
        c = self._cursors.get(name)
        if c is not None:
            return c
        if self._closed_reason == "deleted":
            raise LedgerClosedError(f"ledger {self.name!r} is deleted")
        md = self._lc if initial_position == "latest" else self._first - 1
        c = ManagedCursor(self, name, md, self._store._cursor_dirty)
        self._cursors[name] = c
        c._touch()
        return c

    def _cursor_clean(self, cursor: ManagedCursor) -> None:
        self._store._cursor_clean(cursor)

    def _write(self, ops: Sequence[WriteOp]) -> asyncio.Future[None]:
        return self._store._submit(ops, None)

    def _restore_cursor(self, name: str, state: bytes, attempts: dict[int, str] | None = None,
                        deliveries: Iterable[DeliveryRow] = ()) -> None:
        c = self._cursors[name] = ManagedCursor.from_state(self, name, state, self._store._cursor_dirty,
                                                           deliveries)
        if attempts:
            c.deliveries.attempts.restore(attempts)

    async def delete_cursor(self, name: str) -> None:
        c = self._cursors.pop(name, None)
        if c is None:
            return
        c._deleted = True
        self._store._cursor_clean(c)
        await self._store._submit([DeleteCursorOp(self.ledger_id, name)], None)
        self._schedule_trim()

    # ---- trimming ----

    def _schedule_trim(self, delay: float | None = None) -> None:
        """A trim after `delay` seconds (the store's trim interval unless given), unless one waits."""
        if self._trim_handle is None and self._closed_reason is None:
            loop = self._store._loop
            if loop is not None:
                wait = self._store.trim_interval if delay is None else delay
                self._trim_handle = loop.call_later(wait, self.trim)

    def trim(self) -> None:
        if self._trim_handle is not None:
            self._trim_handle.cancel()
            self._trim_handle = None
        if not self._cursors or self._closed_reason == "deleted":
            return
        upto = retention_cut(self, min(min(c._md for c in self._cursors.values()), self._lc))
        if upto < self._first:
            return
        more = upto - self._first >= TRIM_CHUNK_ENTRIES
        if more:
            upto = self._first + TRIM_CHUNK_ENTRIES - 1
        # persist this ledger's dirty cursors in the same transaction as the delete
        # (a cursor inside a transaction is written by it, not here)
        ops: list[WriteOp] = []
        for c in self._cursors.values():
            if c._dirty and not c.in_transaction:
                ops.append(c._snapshot_op())
                self._store._cursor_clean(c)
        ops.append(TrimOp(self, upto, more))
        self._first = upto + 1
        self.counts.forget_before(self._first)
        self._store._submit_background(ops)

    async def trim_now(self) -> None:
        """The retention pass run to its end: every chunk deleted and committed."""
        while True:
            first = self._first
            self.trim()
            await self._store._submit([], None)  # resolves after everything submitted before it
            if self._first == first:
                return

    def bytes_between(self, first: int, last: int) -> int:
        """Stored bytes of entries [first, last]."""
        return self._store._sum_sizes(self.ledger_id, first, last) if last >= first else 0

    def first_entries_over(self, first: int, last: int, nbytes: int) -> int:
        """The last id of the shortest run first..k (k <= last) of at least `nbytes`; else `last`."""
        return self._store._first_entries_over(self.ledger_id, first, last, nbytes)

    def _on_trim_committed(self, freed_bytes: int, more: bool) -> None:
        self._size -= freed_bytes
        if more:
            self._schedule_trim(0)  # the next chunk

    def _close(self, reason: str) -> None:
        self._closed_reason = reason
        if self._trim_handle is not None:
            self._trim_handle.cancel()
            self._trim_handle = None

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name!r}, id={self.ledger_id}, lc={self._lc})"
