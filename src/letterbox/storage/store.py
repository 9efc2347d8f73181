# Store: owns <data_dir>/letterbox.db (SQLite, WAL), every ManagedLedger, the shared tail cache,
# the metadata map and the single writer thread.
#
# Threading / durability model:
#   * All writes go through Writer (writer.py): one thread, one connection, group commit.
#     A write is a list of ops submitted atomically with _submit(ops, result) -> Future; the
#     future resolves on the loop thread after COMMIT (durable per sync mode), after each op's
#     on_commit() has updated in-memory state, and confirm listeners fire once per ledger.
#   * Reads use a separate read-only connection on the event-loop thread (point/range queries
#     on the (ledger_id, entry_id) index); recent entries are served from the tail cache. A
#     large entry's row names its payload file (payload_files.py), read in its place.
#   * In-memory state (ledgers, cursors, metadata) is mutated only on the loop thread.
#   * Dirty cursors are serialized once per loop iteration and written in the writer's next
#     transaction; while a cursor's background write is in flight, its next one waits for
#     that commit (barrier() and close() write every dirty cursor at once).
#   * Storage faults (disk full, I/O error, read-only) are survivable: failed writes fail their callers,
#     the store turns degraded (health.py) and retries with backoff; the first commit that succeeds
#     makes it healthy again. Nothing is fenced for good by a fault; close() then logs one warning.
#
# Multi-op atomic transactions (e.g. a dead-letter move: append to ledger A and ack in cursor B
# atomically) are composed with the public Transaction (transaction.py): store.transaction().
from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from .cache import EntryCache, Row
from .errors import StorageFault, StoreClosedError, as_storage_error, is_storage_fault
from .health import StorageHealth
from .integrity import read_checked
from .managed_cursor import ManagedCursor
from .managed_ledger import ManagedLedger
from .ops import CreateLedgerOp, DeleteLedgerOp, MetadataOp, OpLedger, ProbeOp, Then, WriteOp
from .payload_files import LARGE_PAYLOAD_BYTES, PayloadFiles
from .schema import SyncMode, db_path
from .start_checks import open_checked
from .transaction import Transaction
from .writer import Submission, Writer

__all__ = ["Store", "SyncMode"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_READ_RANGE = (
    "SELECT entry_id, publish_time, num_messages, data FROM entries "
    "WHERE ledger_id = ? AND entry_id >= ? AND entry_id <= ? ORDER BY entry_id"
)


class Store:
    def __init__(
        self,
        data_dir: Path,
        sync: SyncMode = "full",
        cache_bytes: int = 64 * 1024 * 1024,
        trim_interval: float = 0.5,
        large_payload_bytes: int = LARGE_PAYLOAD_BYTES,
    ) -> None:
        if sync not in ("full", "normal", "off"):
            raise ValueError(f"invalid sync mode {sync!r}")
        self.data_dir = Path(data_dir)
        self.sync: SyncMode = sync
        self._payloads = PayloadFiles(self.data_dir / "payloads", sync != "off", large_payload_bytes)
        self.trim_interval = trim_interval
        self._cache = EntryCache(cache_bytes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: Writer | None = None
        self._reader: sqlite3.Connection | None = None
        self._ledgers: dict[str, ManagedLedger] = {}
        self._next_ledger_id = 1
        self._metadata: dict[str, str] = {}
        self._dirty_cursors: dict[ManagedCursor, None] = {}  # insertion-ordered set
        self._cursor_writes: dict[ManagedCursor, int] = {}  # background record writes in flight
        self._flush_scheduled = False
        self._closing = False
        self.health = StorageHealth()
        self._retry: asyncio.TimerHandle | None = None

    # ---- lifecycle ----

    async def start(self) -> None:
        if self._writer is not None:
            raise RuntimeError("store already started")
        self._loop = asyncio.get_running_loop()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = db_path(self.data_dir)
        writer = Writer(path, self.sync, self._loop, self._complete, self._payloads)
        # checks the data dir, then starts the writer (it creates the schema) and loads the state
        self._reader, state = await open_checked(self.data_dir, writer, self._payloads)
        self._writer = writer
        await asyncio.to_thread(self._payloads.sweep, self._reader)  # files a crash left
        self._next_ledger_id = state.next_ledger_id
        self._metadata = state.metadata
        for rl in state.ledgers:
            led = ManagedLedger(
                self,
                rl.name,
                rl.ledger_id,
                first_entry_id=rl.first_entry_id,
                next_entry_id=rl.next_entry_id,
                cum_messages=rl.cum_messages,
                size_bytes=rl.size_bytes,
                sequences=rl.sequences,
            )
            for cname, cstate in rl.cursors:
                led._restore_cursor(cname, cstate, rl.attempts.get(cname), rl.deliveries.get(cname, ()))
            self._ledgers[rl.name] = led

    async def close(self) -> None:
        if self._writer is None or self._closing:
            return
        self._flush_dirty_cursors(force=True)
        self._closing = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        for led in self._ledgers.values():
            led._close("closed")
        try:
            await self._submit_unchecked([], None)  # barrier: everything queued before is durable
        except StorageFault as exc:  # one line, no traceback
            log.warning("stopping while storage writes fail (%s): the last cursor states were not written; what "
                        "was receipted or committed is on disk, later acks are redelivered after a restart", exc)
        await self._writer.stop()
        self._writer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def commit_count(self) -> int:
        """Number of writer transactions so far (group commits)."""
        return self._writer.commit_count if self._writer is not None else 0

    # ---- ledgers ----

    def ledger_names(self) -> list[str]:
        return sorted(self._ledgers)

    def get_ledger(self, name: str) -> ManagedLedger | None:
        return self._ledgers.get(name)

    def open_ledger(self, name: str) -> ManagedLedger:
        led = self._ledgers.get(name)
        if led is not None:
            return led
        self._check_open()
        lid = self._next_ledger_id
        self._next_ledger_id += 1
        led = ManagedLedger(self, name, lid, created=False)
        self._ledgers[name] = led
        self._submit_background([CreateLedgerOp(name, lid, ledger=led)])
        return led

    async def delete_ledger(self, name: str) -> None:
        led = self._ledgers.pop(name, None)
        if led is None:
            return
        led._close("deleted")
        for c in led._cursors.values():
            c._deleted = True
            self._cursor_clean(c)
        self._cache.drop(led._cache)
        await self._submit([DeleteLedgerOp(led.ledger_id)], None)

    # ---- metadata ----

    def get_metadata(self, key: str) -> str | None:
        return self._metadata.get(key)

    async def put_metadata(self, key: str, value: str | None) -> None:
        """Store (None: delete) a metadata value; get_metadata sees it once it committed."""
        await self.submit_metadata(key, value)

    def submit_metadata(self, key: str, value: str | None) -> asyncio.Future[None]:
        """put_metadata, queued to the writer at once: it commits before (or with) anything
        submitted after this call (the writer applies submissions in order)."""
        return self._submit([MetadataOp(key, value, self._metadata_committed)], None)

    def _metadata_committed(self, key: str, value: str | None) -> None:
        if value is None:
            self._metadata.pop(key, None)
        else:
            self._metadata[key] = value

    def _metadata_op(self, key: str, value: str | None) -> MetadataOp:
        """The op of a metadata write inside a Transaction (storage-internal)."""
        return MetadataOp(key, value, self._metadata_committed)

    def metadata_items(self, prefix: str) -> list[tuple[str, str]]:
        return sorted((k, v) for k, v in self._metadata.items() if k.startswith(prefix))

    # ---- write plumbing ----

    def _check_open(self) -> Writer:
        if self._writer is None or self._closing:
            raise StoreClosedError("store is not open")
        return self._writer

    def _submit(self, ops: Sequence[WriteOp], result: T) -> asyncio.Future[T]:
        """Submit ops as ONE atomic unit (inside the writer's next group transaction)."""
        self._check_open()
        return self._submit_unchecked(ops, result)

    def _submit_unchecked(self, ops: Sequence[WriteOp], result: T) -> asyncio.Future[T]:
        assert self._loop is not None and self._writer is not None
        fut: asyncio.Future[T] = self._loop.create_future()
        self._writer.submit(Submission(ops, fut, result))
        return fut

    def _submit_then(self, ops: Sequence[WriteOp], then: Then) -> None:
        """As _submit, with no future: `then` hears the outcome in the callback that takes it back."""
        self._check_open().submit(Submission(ops, None, None, then))

    def transaction(self) -> Transaction:
        """A new atomic step of appends and cursor acknowledgements (see transaction.py)."""
        self._check_open()
        return Transaction(self)

    async def barrier(self) -> None:
        """Resolves once everything submitted before it is durable (incl. dirty cursors)."""
        self._flush_dirty_cursors(force=True)
        await self._submit([], None)

    def _submit_background(self, ops: Sequence[WriteOp]) -> None:
        self._submit(ops, None).add_done_callback(_log_failure)

    def _complete(self, group: list[Submission]) -> None:
        """Loop thread: apply committed ops to memory, resolve futures, notify listeners."""
        touched: dict[OpLedger, None] = {}
        committed = False
        for sub in group:
            err = sub.error
            if err is None:
                for op in sub.ops:
                    op.on_commit()
                    if op.writes:
                        committed = True
                    if op.appends:
                        touched[op.ledger] = None  # type: ignore[attr-defined]
                sub.settle(None)
            else:
                if is_storage_fault(err):
                    self._storage_fault(err)
                for op in sub.ops:
                    op.on_fail(err)
                sub.settle(as_storage_error(err))
        if committed and self.health.committed():
            log.warning("storage writes succeed again: the broker is healthy")
            self._schedule_flush()
        for led in touched:
            led._notify_confirmed()

    def _storage_fault(self, exc: BaseException) -> None:
        """A write failed on a storage fault: degraded until a commit succeeds; retry."""
        if self.health.failed(exc, self.data_dir):
            log.warning("storage write failed (%s): the broker is degraded; SENDs and "
                        "acknowledgements that need the disk fail until writes succeed again", exc)
        if self._retry is None and self._loop is not None and not self._closing:
            self._retry = self._loop.call_later(self.health.next_delay(), self._retry_writes)

    def _retry_writes(self) -> None:
        """While degraded: a probe write and the dirty cursors, again with backoff."""
        self._retry = None
        if not self.health.degraded or self._writer is None or self._closing:
            return
        self._submit_background([ProbeOp()])
        self._flush_dirty_cursors(force=True)
        self._retry = self._loop.call_later(self.health.next_delay(), self._retry_writes) if self._loop else None

    def _cursor_dirty(self, cursor: ManagedCursor) -> None:
        self._dirty_cursors[cursor] = None
        if not self.health.degraded:  # while degraded, _retry_writes flushes with backoff
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None and not self._closing:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_dirty_cursors)

    def _cursor_clean(self, cursor: ManagedCursor) -> None:
        """The cursor's state is being written by a caller: no background write needed."""
        self._dirty_cursors.pop(cursor, None)

    def _flush_dirty_cursors(self, force: bool = False) -> None:
        """Write every dirty cursor's record. A cursor whose background write is still in
        flight is written after that one commits (once, with everything since), unless
        `force` (barrier, close, retry): a record costs O(its ack ranges) to serialize."""
        self._flush_scheduled = False
        if not self._dirty_cursors or self._writer is None or self._closing:
            return
        ops: list[WriteOp] = []
        written: list[ManagedCursor] = []
        waiting: dict[ManagedCursor, None] = {}
        inflight = self._cursor_writes
        for c in self._dirty_cursors:
            if c.in_transaction or (not force and c in inflight):  # written later (see above)
                waiting[c] = None
            elif not c._deleted:
                ops.append(c._snapshot_op())
                written.append(c)
        self._dirty_cursors = waiting
        if ops:
            for c in written:
                inflight[c] = inflight.get(c, 0) + 1
            self._submit(ops, None).add_done_callback(lambda f: self._cursor_writes_done(written, f))

    def _cursor_writes_done(self, written: list[ManagedCursor], fut: asyncio.Future[None]) -> None:
        _log_failure(fut)
        inflight = self._cursor_writes
        for c in written:
            left = inflight.pop(c) - 1
            if left:
                inflight[c] = left
        if self._dirty_cursors and not self.health.degraded:  # degraded: _retry_writes writes them
            self._schedule_flush()

    # ---- read plumbing (loop thread, read-only connection) ----

    def _read_range(
        self, ledger_id: int, first: int, last: int, max_bytes: int, out: list[Row]
    ) -> int:
        if self._reader is None:
            raise StoreClosedError("store is not open")
        nbytes = 0
        cur = self._reader.execute(_READ_RANGE, (ledger_id, first, last))
        try:
            for eid, pt, nm, data in cur:  # a large entry's row names its payload file
                data = read_checked(self._payloads, self._ledgers, ledger_id, eid, data, bool(out))
                if data is None:  # damaged after good ones: those first, the next read raises
                    break
                out.append((ledger_id, eid, pt, nm, len(data), data))
                nbytes += len(data)
                if nbytes >= max_bytes:
                    break
        finally:
            cur.close()
        return nbytes

    def _first_entries_over(self, ledger_id: int, first: int, last: int, nbytes: int) -> int:
        """The last entry id of the shortest run first..k (k <= last) whose sizes add up to at least `nbytes`."""
        if self._reader is None:
            raise StoreClosedError("store is not open")
        total = 0
        cur = self._reader.execute(
            "SELECT entry_id, size FROM entries WHERE ledger_id = ? AND entry_id BETWEEN ? AND ? "
            "ORDER BY entry_id", (ledger_id, first, last))
        try:
            for eid, size in cur:
                total += size
                if total >= nbytes:
                    return int(eid)
        finally:
            cur.close()
        return last

    def _sum_sizes(self, ledger_id: int, first: int, last: int) -> int:
        if self._reader is None:
            raise StoreClosedError("store is not open")
        row = self._reader.execute(
            "SELECT COALESCE(SUM(size), 0) FROM entries WHERE ledger_id = ? AND entry_id BETWEEN ? AND ?",
            (ledger_id, first, last),
        ).fetchone()
        return int(row[0])

    def publish_time_range(self, ledger_id: int, first: int, last: int) -> tuple[int, int] | None:
        """The smallest and largest publish times of the stored entries first..last (None: none)."""
        if self._reader is None:
            raise StoreClosedError("store is not open")
        row = self._reader.execute(
            "SELECT MIN(publish_time), MAX(publish_time) FROM entries "
            "WHERE ledger_id = ? AND entry_id BETWEEN ? AND ?",
            (ledger_id, first, last),
        ).fetchone()
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]))

    def _read_publish_time(self, ledger_id: int, entry_id: int) -> int | None:
        if self._reader is None:
            raise StoreClosedError("store is not open")
        row = self._reader.execute(
            "SELECT publish_time FROM entries WHERE ledger_id = ? AND entry_id = ?", (ledger_id, entry_id)).fetchone()
        return None if row is None else int(row[0])


def _log_failure(fut: asyncio.Future[Any]) -> None:
    exc = None if fut.cancelled() else fut.exception()
    if exc is not None and not is_storage_fault(exc):  # faults: one line from _storage_fault
        log.error("background storage write failed: %s", exc)
