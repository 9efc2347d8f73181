# Transaction: the public way to compose one atomic storage step above the storage layer
# (the broker's dead-letter move, a message move, a redrive chunk, a purge): appends to any
# ledgers plus acknowledgements in any cursors, committed by the writer thread in ONE SQLite
# transaction (one writer submission, see writer.py), or not at all.
#
#     async with store.transaction() as txn:
#         await txn.lock(cursor)            # one transaction per cursor at a time
#         if cursor.is_acked(eid): ...      # decide on a state nobody else is moving
#         txn.append(dlq_ledger, data, 1, now)
#         txn.ack(cursor, [eid])
#         await txn.commit()                # raises the storage error if it failed
#
# Invariants:
#   * nothing in memory changes before commit(): appends, acks and cursor properties are only
#     recorded;
#   * commit() assigns the entry ids (in call order, after the ledger's other appends so far)
#     and serializes each cursor's NEW state from a detached copy, the live cursor untouched
#     but for handing its unwritten changes to the transaction's write (a failed commit
#     makes the cursor write everything again);
#   * after the writer committed, the acks are applied to the live cursors (marking nothing to
#     write: the transaction wrote them) and the entries
#     are confirmed to their ledgers (readers, the tail cache, listeners) in the same loop
#     callback, before any other code runs: no dispatcher reads an appended entry while a
#     cursor still lacks the transaction's ack of it (a subscription-only redrive acks its
#     new entry on the other subscriptions);
#   * metadata values written with put_metadata() commit with the rest (a task's progress
#     record moves with the work it describes);
#   * a cursor deleted before commit() (its DeleteCursorOp already queued) is not written:
#     a commit never brings back the state row of a deleted subscription;
#   * if it failed, the cursors are as they were (the messages stay where they are,
#     redeliverable) and the ledgers give the reserved ids back (managed_ledger.py);
#   * a cursor locked by a transaction is not written in the background meanwhile, so a
#     record without the transaction's acks never overwrites the transaction's record.
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Protocol, TypeVar

from .entry import UNREAD
from .errors import StorageError
from .managed_cursor import ManagedCursor
from .managed_ledger import ManagedLedger
from .ops import AppendOp, CursorWriteOp, MetadataOp, WriteOp
from .position import Position

T = TypeVar("T")
CursorChange = Callable[[ManagedCursor], object]


class TransactionStore(Protocol):
    def _submit(self, ops: Sequence[WriteOp], result: T) -> asyncio.Future[T]: ...

    def _cursor_dirty(self, cursor: ManagedCursor) -> None: ...

    def _metadata_op(self, key: str, value: str | None) -> MetadataOp: ...


class _ApplyChanges(WriteOp):
    """No row of its own: once the submission committed, applies the transaction's cursor
    changes to the live cursors (on the loop thread, in the writer's completion callback)."""

    __slots__ = ("changes",)
    writes = False

    def __init__(self, changes: list[tuple[ManagedCursor, list[CursorChange]]]) -> None:
        self.changes = changes

    def apply(self, conn: object, fenced: set[int]) -> None:
        pass

    def ledgers(self) -> tuple[int, ...]:
        return ()  # no row: its submission's appends and cursor records give the order

    def on_commit(self) -> None:
        for cursor, cursor_changes in self.changes:
            apply_committed(cursor, cursor_changes)


def cursor_op(cursor: ManagedCursor, changes: Iterable[CursorChange]) -> CursorWriteOp:
    """The write of `cursor` in a transaction that makes `changes`: the state they lead to
    (applied to a detached copy, the live cursor untouched) with every change the cursor
    made so far, which the transaction now writes (if it does not commit, the cursor
    writes all again)."""
    copy = cursor.detached_copy()
    for change in changes:
        change(copy)
    op = copy._snapshot_op()
    op.failed = cursor._write_failed
    cursor.deliveries.drop_changes()
    cursor.deliveries.attempts.drop_changes()
    cursor._dirty = False
    cursor.write_by_caller()
    return op


def apply_committed(cursor: ManagedCursor, changes: Iterable[CursorChange]) -> None:
    """Apply the changes of a transaction that committed to the live cursor: its write held
    them, so they leave nothing to write (what changed since it was made stays to write)."""
    deliveries = cursor.deliveries
    dirty, on_dirty = cursor._dirty, cursor._on_dirty
    cursor._on_dirty = None
    deliveries.durable = deliveries.attempts.durable = False
    try:
        for change in changes:
            change(cursor)
    finally:
        deliveries.durable = deliveries.attempts.durable = True
        cursor._dirty, cursor._on_dirty = dirty, on_dirty


class PendingAppend:
    """One append of a transaction; `position` is known once commit() was called."""

    __slots__ = ("data", "deliver_at_time", "ledger", "num_messages", "op", "publish_time")

    def __init__(self, ledger: ManagedLedger, data: bytes, num_messages: int, publish_time: int,
                 deliver_at_time: int | None = UNREAD) -> None:
        self.ledger = ledger
        self.data = data
        self.num_messages = num_messages
        self.publish_time = publish_time
        self.deliver_at_time = deliver_at_time  # what the entry's metadata says, if the caller knows (entry.py)
        self.op: AppendOp | None = None

    @property
    def position(self) -> Position:
        if self.op is None:
            raise StorageError("the position of an append is known after commit()")
        return self.op.entry.position


class Transaction:
    def __init__(self, store: TransactionStore) -> None:
        self._store = store
        self._appends: list[PendingAppend] = []
        self._appended: dict[ManagedLedger, int] = {}  # appends per ledger (next_entry_id in O(1))
        self._changes: dict[ManagedCursor, list[CursorChange]] = {}
        self._locked: list[ManagedCursor] = []
        self._metadata: dict[str, str | None] = {}
        self._done = False
        self._pending: asyncio.Future[None] | None = None  # the writer submission, once committed

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release()

    async def lock(self, cursor: ManagedCursor) -> None:
        """Wait until no other transaction holds `cursor`, then hold it until this one ends."""
        if cursor not in self._locked:
            await cursor.txn_lock.acquire()
            self._locked.append(cursor)

    # ---- recording ----

    def append(self, ledger: ManagedLedger, data: bytes, num_messages: int, publish_time: int,
               deliver_at_time: int | None = UNREAD) -> PendingAppend:
        """Append `data` to `ledger` with this transaction; `deliver_at_time`: its metadata's
        delivery time (None: none) when the caller built it, so readers need not parse it."""
        if num_messages < 1:
            raise ValueError("num_messages must be >= 1")
        pending = PendingAppend(ledger, bytes(data), num_messages, publish_time, deliver_at_time)
        self._appends.append(pending)
        self._appended[ledger] = self._appended.get(ledger, 0) + 1
        return pending

    @property
    def appends(self) -> tuple[PendingAppend, ...]:
        """The appends of this transaction, in order (read-only)."""
        return tuple(self._appends)

    def next_entry_id(self, ledger: ManagedLedger) -> int:
        """The id the next append of this transaction to `ledger` is expected to get."""
        return ledger.next_entry_id + self._appended.get(ledger, 0)

    def ack(self, cursor: ManagedCursor, entry_ids: Iterable[int]) -> None:
        ids = list(entry_ids)
        self._change(cursor, lambda c: c.ack(ids))

    def ack_appended(self, cursor: ManagedCursor, append: PendingAppend) -> None:
        """Acknowledge, in `cursor`, the entry that `append` (of this transaction) creates:
        its id is only known at commit(), where appends are prepared before cursor changes."""
        self._change(cursor, lambda c: c.ack([append.position.entry_id]))

    def ack_batch_mask(self, cursor: ManagedCursor, entry_id: int, batch_size: int, mask: int) -> None:
        self._change(cursor, lambda c: c.ack_batch_mask(entry_id, batch_size, mask))

    def ack_cumulative(self, cursor: ManagedCursor, entry_id: int) -> None:
        self._change(cursor, lambda c: c.ack_cumulative(entry_id))

    def put_metadata(self, key: str, value: str | None) -> None:
        """Store (None: delete) a metadata value with this transaction (the store's
        get_metadata sees it once committed)."""
        self._metadata[key] = value

    def set_property(self, cursor: ManagedCursor, key: str, value: int | None) -> None:
        """Set (None: remove) one of the cursor's properties with this transaction."""
        self._change(cursor, lambda c: c.set_property(key, value))

    def _change(self, cursor: ManagedCursor, change: CursorChange) -> None:
        if cursor not in self._locked:
            raise StorageError(f"lock cursor {cursor.name!r} in the transaction before changing it")
        self._changes.setdefault(cursor, []).append(change)

    # ---- commit ----

    async def commit(self) -> None:
        """Write everything in one storage transaction; apply it in memory once committed.
        Raises the storage error (nothing changed in memory) if it did not commit."""
        await asyncio.shield(self.submit())

    def submit(self) -> asyncio.Future[None]:
        """commit() in two steps: hand everything to the writer now (the entry ids are assigned
        here, before any other code runs) and return the future of its commit, to await
        (shielded) while doing other work. Raises at once if the ids cannot be reserved."""
        if self._done:
            raise StorageError("transaction already committed or aborted")
        self._done = True
        ops: list[WriteOp] = []
        created: set[ManagedLedger] = set()
        try:
            for a in self._appends:
                if a.ledger not in created:
                    created.add(a.ledger)
                    ops.extend(a.ledger._create_ops())
                a.op = a.ledger._prepare_append(a.data, a.num_messages, a.publish_time, deliver_at_time=a.deliver_at_time)
                ops.append(a.op)
        except BaseException:
            for a in reversed(self._appends):  # give back the ids already reserved
                if a.op is not None:
                    a.ledger._cancel_append(a.op)
                    a.op = None
            raise
        for cursor, changes in self._changes.items():
            if cursor._deleted:  # deleted while this transaction waited: its row stays deleted
                continue
            ops.append(cursor_op(cursor, changes))
        ops.extend(self._store._metadata_op(k, v) for k, v in self._metadata.items())
        # applied by the writer's completion itself, right after the appends' on_commit: a
        # caller cancelled while the writer commits (an admin request whose client went away)
        # must not leave a committed move unapplied in memory, and no dispatch may run between
        ops.append(_ApplyChanges(list(self._changes.items())))
        submitted = self._store._submit(ops, None)
        self._pending = submitted
        return submitted

    def _release(self) -> None:
        self._done = True
        pending = self._pending
        if pending is not None and not pending.done():  # cancelled caller: unlock after commit
            pending.add_done_callback(lambda _f: self._unlock())
            return
        self._unlock()

    def _unlock(self) -> None:
        for cursor in self._locked:
            cursor.txn_lock.release()
            if cursor._dirty and not cursor._deleted:  # changed meanwhile: write it now
                self._store._cursor_dirty(cursor)
        self._locked.clear()
