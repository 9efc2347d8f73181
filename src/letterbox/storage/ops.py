# Write operations executed by the single writer thread (see writer.py).
#
# An op has two halves:
#   apply(conn, fenced)  -- runs on the WRITER thread inside the group transaction; SQL only,
#                           must not touch loop-owned state (it may be re-run once if the
#                           group is retried op-by-op after a failure).
#   on_commit()/on_fail() -- run on the EVENT LOOP thread after the transaction committed
#                           (or the op's submission failed); they update in-memory state.
# Ops are plain data captured on the loop thread at submit time (e.g. a cursor's state is
# serialized when the op is built), so the writer never reads live objects.
# ledgers() names the ledgers whose write order an op must keep (None: it orders against
# every ledger); the payload lane (payload_lane.py) routes by it. An AppendOp of a large
# entry stores the name of its payload file (payload_files.py) in place of the data; ops that
# delete such rows list the files in `released`, unlinked after their commit.
from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from .attempt_log import AttemptChanges
from .cache import Row, row_of
from .delivery_rows import DeliveryChanges, delete_rows
from .entry import Entry
from .errors import LedgerClosedError
from .row_statements import delete_json_keys, execute_rows


class OpLedger(Protocol):
    """What the ops call back on the loop thread (ManagedLedger implements it)."""

    ledger_id: int

    def on_rows_committed(self, rows: Sequence[Row], delivers: Sequence[int | None], nbytes: int,
                          seqs: Iterable[tuple[str, int]] = ()) -> None: ...

    def _on_append_failed(self, exc: BaseException) -> None: ...

    def _on_created(self) -> None: ...

    def _on_trim_committed(self, freed_bytes: int, more: bool) -> None: ...

    def _notify_confirmed(self) -> None: ...


_INSERT_HEAD = "INSERT INTO entries (ledger_id, entry_id, publish_time, num_messages, size, data)"
INSERT_ENTRY = f"{_INSERT_HEAD} VALUES (?, ?, ?, ?, ?, ?)"
def insert_entries(conn: sqlite3.Connection, rows: Sequence[tuple[int, int, int, int, int, bytes | str]]) -> None:
    """INSERT_ENTRY for every row, in order, in a handful of statements (row_statements.py)."""
    execute_rows(conn, _INSERT_HEAD, rows)


UPSERT_SEQ = (
    "INSERT INTO producer_seq (ledger_id, producer_name, sequence_id) VALUES (?, ?, ?) "
    "ON CONFLICT (ledger_id, producer_name) DO UPDATE SET sequence_id = excluded.sequence_id"
)


Then = Callable[[BaseException | None], None]  # hears a submission's outcome: None, or its error


class WriteOp:
    __slots__ = ()
    nbytes = 0  # approximate payload size, used to bound a group transaction
    writes = True  # False: changes no row (its commit says nothing about the disk)
    appends = False  # True: stores entries of its ledger (AppendOp, append_run.AppendRunOp)
    released: Sequence[str] = ()  # payload files whose rows apply() deleted

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        raise NotImplementedError

    def ledgers(self) -> tuple[int, ...] | None:
        """The ledgers this op's order matters to; None: all of them (a barrier)."""
        return None

    def on_commit(self) -> None:
        pass

    def on_fail(self, exc: BaseException) -> None:
        pass


class AppendOp(WriteOp):
    __slots__ = ("entry", "ledger", "nbytes", "payload_ref", "producer_name", "sequence_id")
    appends = True

    def __init__(
        self,
        ledger: OpLedger,
        entry: Entry,
        producer_name: str | None,
        sequence_id: int | None,
    ) -> None:
        self.ledger = ledger
        self.entry = entry
        self.producer_name = producer_name
        self.sequence_id = sequence_id
        self.nbytes = len(entry.data)
        self.payload_ref: str | None = None  # the payload's file (set by the payload lane)

    @property
    def ledger_id(self) -> int:
        return self.entry.position.ledger_id

    def ledgers(self) -> tuple[int, ...]:
        return (self.entry.position.ledger_id,)

    def entry_row(self) -> tuple[int, int, int, int, int, bytes | str]:
        e = self.entry
        ref = self.payload_ref
        return (
            e.position.ledger_id,
            e.position.entry_id,
            e.publish_time,
            e.num_messages,
            len(e.data),
            e.data if ref is None else ref,
        )

    def seq_row(self) -> tuple[int, str, int] | None:
        if self.producer_name is None or self.sequence_id is None:
            return None
        return (self.entry.position.ledger_id, self.producer_name, self.sequence_id)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        if self.ledger_id in fenced:
            raise LedgerClosedError(f"ledger {self.ledger_id} is fenced after a failed write")
        conn.execute(INSERT_ENTRY, self.entry_row())
        seq = self.seq_row()
        if seq is not None:
            conn.execute(UPSERT_SEQ, seq)

    def on_commit(self) -> None:
        e = self.entry
        seq = self.seq_row()
        self.ledger.on_rows_committed([row_of(e)], [e.deliver_at_time], len(e.data),
                                      () if seq is None else ((seq[1], seq[2]),))

    def on_fail(self, exc: BaseException) -> None:
        self.ledger._on_append_failed(exc)


class CreateLedgerOp(WriteOp):
    """The ledger's row. Idempotent: it rides along with the ledger's appends until one
    commit has stored it, so entries never commit without their ledger (even when the
    first attempt failed on a full disk)."""

    __slots__ = ("first_entry_id", "ledger", "ledger_id", "name")

    def __init__(self, name: str, ledger_id: int, first_entry_id: int = 0,
                 ledger: OpLedger | None = None) -> None:
        self.name = name
        self.ledger_id = ledger_id
        self.first_entry_id = first_entry_id
        self.ledger = ledger

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO ledgers (name, ledger_id, first_entry_id) VALUES (?, ?, ?)",
            (self.name, self.ledger_id, self.first_entry_id),
        )
        conn.execute(
            "UPDATE counters SET value = max(value, ?) WHERE name = 'next_ledger_id'",
            (self.ledger_id + 1,),
        )

    def on_commit(self) -> None:
        if self.ledger is not None:
            self.ledger._on_created()


class DeleteLedgerOp(WriteOp):
    __slots__ = ("ledger_id", "released")

    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self.released: Sequence[str] = ()

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        lid = (self.ledger_id,)
        self.released = payload_files_of(conn, "ledger_id = ?", lid)
        conn.execute("DELETE FROM entries WHERE ledger_id = ?", lid)
        conn.execute("DELETE FROM cursors WHERE ledger_id = ?", lid)
        conn.execute("DELETE FROM attempt_logs WHERE ledger_id = ?", lid)
        delete_rows(conn, "ledger_id = ?", lid)
        conn.execute("DELETE FROM compacted_entries WHERE ledger_id = ?", lid)
        conn.execute("DELETE FROM producer_seq WHERE ledger_id = ?", lid)
        conn.execute("DELETE FROM ledgers WHERE ledger_id = ?", lid)


class TrimOp(WriteOp):
    """Delete entries with entry_id <= upto and persist the trim watermark; `more`: acknowledged
    entries past `upto` wait for the next trim (the ledger starts it once this one committed)."""

    __slots__ = ("freed_bytes", "ledger", "more", "released", "upto")

    def __init__(self, ledger: OpLedger, upto: int, more: bool = False) -> None:
        self.ledger = ledger
        self.upto = upto
        self.more = more
        self.freed_bytes = 0
        self.released: Sequence[str] = ()

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        lid = self.ledger.ledger_id
        # one pass for the bytes freed and whether a payload file is among the rows
        freed, files = conn.execute(
            "SELECT COALESCE(SUM(size), 0), COUNT(CASE WHEN typeof(data) = 'text' THEN 1 END) "
            "FROM entries WHERE ledger_id = ? AND entry_id <= ?",
            (lid, self.upto),
        ).fetchone()
        self.freed_bytes = int(freed)
        if files:
            self.released = payload_files_of(conn, "ledger_id = ? AND entry_id <= ?", (lid, self.upto))
        conn.execute("DELETE FROM entries WHERE ledger_id = ? AND entry_id <= ?", (lid, self.upto))
        conn.execute(
            "UPDATE ledgers SET first_entry_id = max(first_entry_id, ?) WHERE ledger_id = ?",
            (self.upto + 1, lid),
        )

    def on_commit(self) -> None:
        self.ledger._on_trim_committed(self.freed_bytes, self.more)


_ATTEMPTS_HEAD = "INSERT INTO attempt_logs (ledger_id, cursor, entry_id, attempts)"
_ATTEMPTS_TAIL = " ON CONFLICT (ledger_id, cursor, entry_id) DO UPDATE SET attempts = excluded.attempts"


class CursorWriteOp(WriteOp):
    """Rewrite one cursor's record (cursor_record.py, serialized on the loop thread), and the
    rows of its delivery state and attempt log that changed (`deliveries`, delivery_rows.py;
    `attempts`, attempt_log.py). `failed` (optional) runs on the loop thread if the write did
    not commit."""

    __slots__ = ("attempts", "deliveries", "failed", "ledger_id", "name", "state")

    def __init__(self, ledger_id: int, name: str, state: bytes,
                 failed: Callable[[], None] | None = None, attempts: AttemptChanges | None = None,
                 deliveries: DeliveryChanges | None = None) -> None:
        self.ledger_id = ledger_id
        self.name = name
        self.state = state
        self.failed = failed
        self.attempts = attempts
        self.deliveries = deliveries

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute(
            "INSERT INTO cursors (ledger_id, name, state) VALUES (?, ?, ?) "
            "ON CONFLICT (ledger_id, name) DO UPDATE SET state = excluded.state",
            (self.ledger_id, self.name, self.state),
        )
        if self.deliveries is not None:
            self.deliveries.apply(conn, self.ledger_id, self.name)
        ch = self.attempts
        if ch is not None:
            key = (self.ledger_id, self.name)
            if ch.replace_all:
                conn.execute("DELETE FROM attempt_logs WHERE ledger_id = ? AND cursor = ?", key)
            delete_json_keys(conn, "DELETE FROM attempt_logs WHERE ledger_id = ? AND cursor = ? AND entry_id", key,
                             ch.deletes)
            # (an upsert that updates in place: about half the cost of INSERT OR REPLACE's
            # delete + insert in this WITHOUT ROWID table, same row after it)
            execute_rows(conn, _ATTEMPTS_HEAD, ch.upserts, _ATTEMPTS_TAIL, prefix=key)

    def on_fail(self, exc: BaseException) -> None:
        if self.failed is not None:
            self.failed()


class DeleteCursorOp(WriteOp):
    __slots__ = ("ledger_id", "name")

    def __init__(self, ledger_id: int, name: str) -> None:
        self.ledger_id = ledger_id
        self.name = name

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute(
            "DELETE FROM cursors WHERE ledger_id = ? AND name = ?", (self.ledger_id, self.name)
        )
        conn.execute(
            "DELETE FROM attempt_logs WHERE ledger_id = ? AND cursor = ?", (self.ledger_id, self.name)
        )
        delete_rows(conn, "ledger_id = ? AND cursor = ?", (self.ledger_id, self.name))


class MetadataOp(WriteOp):
    __slots__ = ("committed", "key", "value")

    def __init__(self, key: str, value: str | None,
                 committed: Callable[[str, str | None], None] | None = None) -> None:
        self.key = key
        self.value = value
        self.committed = committed

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        if self.value is None:
            conn.execute("DELETE FROM metadata WHERE key = ?", (self.key,))
        else:
            conn.execute(
                "INSERT INTO metadata (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (self.key, self.value),
            )

    def on_commit(self) -> None:
        if self.committed is not None:
            self.committed(self.key, self.value)


class UnfenceOp(WriteOp):
    """Lets appends of a ledger commit again after it gave back the ids of failed appends
    (queued after every append that could have followed the failed one)."""

    __slots__ = ("ledger_id",)
    writes = False

    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        fenced.discard(self.ledger_id)


class ProbeOp(WriteOp):
    """A one-row write that tells whether the database accepts writes again."""

    __slots__ = ()

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute(
            "INSERT INTO counters (name, value) VALUES ('write_probe', 1) "
            "ON CONFLICT (name) DO UPDATE SET value = value + 1"
        )


def payload_files_of(conn: sqlite3.Connection, where: str, args: tuple[int, ...]) -> list[str]:
    """The payload files named by the entries matching `where` (rows whose data is TEXT)."""
    return [str(r[0]) for r in conn.execute(
        f"SELECT data FROM entries WHERE {where} AND typeof(data) = 'text'", args)]
