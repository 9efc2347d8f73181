# The single writer thread: owns the only read-write SQLite connection.
#
# Callers (on the event loop) enqueue Submissions -- a list of ops + an asyncio future -- on a
# thread-safe queue. The writer blocks for the first submission, drains whatever else is queued
# (bounded by MAX_GROUP_SUBMISSIONS / MAX_GROUP_BYTES), executes the whole group in ONE
# transaction and commits it (group commit: one fsync for many appends), then hands the group
# back to the loop with ONE loop.call_soon_threadsafe(on_done, group).
#
# Invariants:
#   * submissions are applied in queue (= call) order; a submission is atomic (all its ops
#     commit together or none do) -- this is what makes multi-op transactions possible;
#   * a submission's future is resolved (or its `then` called) only after COMMIT returned,
#     i.e. durable per the sync mode;
#   * fast path: the group runs without savepoints, consecutive appends via executemany (and
#     one producer-sequence upsert per ledger and producer, the last one's). If
#     anything fails the transaction is rolled back and re-run with one SAVEPOINT per
#     submission, so one bad submission fails alone;
#   * a ledger whose append failed is fenced in `fenced` for the writer's lifetime so no later
#     append can commit after a gap (entry ids stay contiguous on disk);
#   * submissions reach the queue through the payload lane (payload_lane.py): one holding a
#     large append arrives after its payload file is durable, or already failed (sub.error
#     set: not run, its ledgers fenced); the payload files of a submission that did not
#     commit are removed, those of rows a commit deleted (`released`) are unlinked after it.
from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .append_run import AppendRunOp
from .errors import is_storage_fault
from .ops import UPSERT_SEQ, AppendOp, Then, WriteOp, insert_entries
from .payload_files import PayloadFiles
from .payload_lane import PayloadLane
from .schema import SyncMode, open_writer

log = logging.getLogger(__name__)

MAX_GROUP_SUBMISSIONS = 4096
MAX_GROUP_BYTES = 32 * 1024 * 1024


class Submission:
    """Ops that commit together, and who hears of it on the loop thread: the future's
    callbacks, or `then`, called in the very callback that takes the group back."""

    __slots__ = ("error", "future", "nbytes", "ops", "result", "then")

    def __init__(self, ops: Sequence[WriteOp], future: asyncio.Future[Any] | None, result: Any,
                 then: Then | None = None) -> None:
        self.ops = ops
        self.future = future
        self.result = result
        self.then = then
        self.error: BaseException | None = None
        nbytes = 0
        for op in ops:
            nbytes += op.nbytes
        self.nbytes = nbytes

    def settle(self, exc: BaseException | None) -> None:
        """Loop thread: committed (`exc` None) or failed with `exc`."""
        if self.then is not None:
            try:
                self.then(exc)
            except Exception:  # one listener's bug must not leave the group's others unsettled
                log.exception("a commit listener failed")
        if self.future is not None and not self.future.done():
            if exc is None:
                self.future.set_result(self.result)
            else:
                self.future.set_exception(exc)


class Writer:
    def __init__(
        self,
        path: Path,
        sync: SyncMode,
        loop: asyncio.AbstractEventLoop,
        on_done: Callable[[list[Submission]], None],
        payloads: PayloadFiles | None = None,
    ) -> None:
        self._path = path
        self._sync: SyncMode = sync
        self._loop = loop
        self._on_done = on_done
        self._queue: queue.SimpleQueue[Submission | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        files = payloads or PayloadFiles(path.parent / "payloads", sync != "off")
        self.lane: PayloadLane[Submission] = PayloadLane(files, self._queue.put)
        self.fenced: set[int] = set()
        self.commit_count = 0

    async def start(self) -> None:
        ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="letterbox-storage-writer", daemon=True
        )
        self._thread.start()
        await ready
        self.lane.start()

    def submit(self, sub: Submission) -> None:
        self.lane.submit(sub)

    async def stop(self) -> None:
        if self._thread is None:
            return
        await asyncio.to_thread(self.lane.stop)  # forwards what it holds first
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    # ---- writer thread ----

    def _signal(self, fut: asyncio.Future[None], exc: BaseException | None) -> None:
        def done() -> None:
            if fut.done():
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        self._loop.call_soon_threadsafe(done)

    def _run(self, ready: asyncio.Future[None]) -> None:
        try:
            conn = open_writer(self._path, self._sync)
        except BaseException as exc:
            self._signal(ready, exc)
            return
        self._signal(ready, None)
        try:
            stop = False
            while not stop:
                item = self._queue.get()
                group: list[Submission] = []
                nbytes = 0
                while True:
                    if item is None:
                        stop = True
                        break
                    group.append(item)
                    nbytes += item.nbytes
                    if len(group) >= MAX_GROUP_SUBMISSIONS or nbytes >= MAX_GROUP_BYTES:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if group:
                    self._execute(conn, group)
        finally:
            conn.close()

    def _execute(self, conn: sqlite3.Connection, group: list[Submission]) -> None:
        released: list[str] = []
        try:
            self._run_fast(conn, group, released)
        except Exception as exc:
            log.debug("group commit failed (%s); retrying per submission", exc)
            self._rollback(conn)
            released.clear()
            try:
                self._run_isolated(conn, group, released)
            except Exception as exc2:
                # a storage fault is reported once by the Store (degraded), not per group
                log.log(logging.DEBUG if is_storage_fault(exc2) else logging.ERROR,
                        "storage commit failed: %s", exc2)
                self._rollback(conn)
                released.clear()
                for sub in group:
                    if sub.error is None:
                        sub.error = exc2
                    self._fence(sub)
        if released:
            self.lane.remove_later(released)
        for sub in group:
            if sub.error is not None:
                self._drop_payloads(sub)
        self.commit_count += 1
        with contextlib.suppress(RuntimeError):  # loop closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._on_done, group)

    def _run_fast(self, conn: sqlite3.Connection, group: list[Submission], released: list[str]) -> None:
        rows: list[tuple[int, int, int, int, int, bytes | str]] = []
        # the last sequence id per (ledger, producer): one upsert each, not one per entry
        seqs: dict[tuple[int, str], tuple[int, str, int]] = {}

        def flush() -> None:
            if rows:
                insert_entries(conn, rows)
                rows.clear()
            if seqs:
                conn.executemany(UPSERT_SEQ, list(seqs.values()))
                seqs.clear()

        conn.execute("BEGIN")
        for sub in group:
            if sub.error is not None:  # its payload could not be written (payload lane)
                self._fence(sub)
                continue
            for op in sub.ops:
                if type(op) is AppendRunOp and op.ledger.ledger_id not in self.fenced:
                    rows.extend(op.rows)
                    if op.seqs:
                        for lid, name, last in op.seq_rows():
                            seqs[lid, name] = (lid, name, last)
                elif type(op) is AppendOp and op.ledger_id not in self.fenced:
                    rows.append(op.entry_row())
                    seq = op.seq_row()
                    if seq is not None:
                        seqs[seq[0], seq[1]] = seq
                else:
                    flush()
                    op.apply(conn, self.fenced)
                    released.extend(op.released)
        flush()
        conn.execute("COMMIT")

    def _run_isolated(self, conn: sqlite3.Connection, group: list[Submission], released: list[str]) -> None:
        conn.execute("BEGIN")
        for sub in group:
            if sub.error is not None:
                self._fence(sub)
                continue
            conn.execute("SAVEPOINT sub")
            try:
                for op in sub.ops:
                    op.apply(conn, self.fenced)
            except Exception as exc:
                conn.execute("ROLLBACK TO sub")
                sub.error = exc
                self._fence(sub)
            else:
                for op in sub.ops:
                    released.extend(op.released)
            conn.execute("RELEASE sub")
        conn.execute("COMMIT")

    def _drop_payloads(self, sub: Submission) -> None:
        """The submission did not commit: its payload files (if any were written) go."""
        names = [op.payload_ref for op in sub.ops if type(op) is AppendOp and op.payload_ref is not None]
        if names:
            try:
                self.lane.files.remove(names)
            except OSError as exc:  # left for the sweep at the next start
                log.warning("could not remove payload files: %s", exc)

    def _fence(self, sub: Submission) -> None:
        for op in sub.ops:
            if op.appends:
                self.fenced.update(op.ledgers() or ())

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
