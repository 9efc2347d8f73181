# Compacted views of topics (Pulsar's topic compaction), stored beside the ledgers.
#
# A compacted view of a ledger is a generation of rows in `compacted_entries`
# (ledger_id, generation, entry_id, publish_time, num_messages, data): copies of the
# entries that hold the latest value of some key up to the view's horizon, under their
# original entry ids (batches rewritten with the superseded messages marked compacted_out).
# The view in force is named by the metadata value "compaction:<ledger_id>" (JSON:
# generation, horizon, entries, bytes, time).
# Invariants:
#   * a new generation is written in chunks (each its own writer transaction) and made the
#     view in force by ONE submission that writes the metadata pointer and deletes every
#     other generation of the ledger: a crash before it leaves the old view (plus stray
#     rows of the unfinished generation, deleted by the next compaction), after it the
#     new one; there is never a moment without a whole view;
#   * the view holds its own copies, so retention trimming the ledger never takes
#     anything from the view; deleting the ledger deletes its views (DeleteLedgerOp).
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .entry import Entry
from .errors import StoreClosedError
from .integrity import read_checked
from .ops import WriteOp
from .position import Position

if TYPE_CHECKING:
    from .store import Store

VIEW_KEY = "compaction:"

_READ = (
    "SELECT entry_id, publish_time, num_messages, data FROM compacted_entries "
    "WHERE ledger_id = ? AND generation = ? AND entry_id >= ? ORDER BY entry_id LIMIT ?"
)
_INSERT = (
    "INSERT OR REPLACE INTO compacted_entries "
    "(ledger_id, generation, entry_id, publish_time, num_messages, data) VALUES (?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class CompactedHorizon:
    """The compacted view in force: its generation and the last ledger entry it covers."""

    generation: int
    horizon: int
    entries: int = 0
    bytes: int = 0
    time: int = 0

    def encode(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> CompactedHorizon:
        doc = json.loads(text)
        return cls(int(doc["generation"]), int(doc["horizon"]), int(doc.get("entries", 0)),
                   int(doc.get("bytes", 0)), int(doc.get("time", 0)))


class _ChunkOp(WriteOp):
    """Rows of a generation being written (not in force until the switch)."""

    __slots__ = ("generation", "ledger_id", "nbytes", "rows")

    def __init__(self, ledger_id: int, generation: int, rows: Sequence[Entry]) -> None:
        self.ledger_id = ledger_id
        self.generation = generation
        self.rows = [(ledger_id, generation, e.entry_id, e.publish_time, e.num_messages, e.data) for e in rows]
        self.nbytes = sum(len(e.data) for e in rows)

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.executemany(_INSERT, self.rows)

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)


class _KeepOnlyOp(WriteOp):
    """Delete every generation of the ledger but `keep` (-1: all of them)."""

    __slots__ = ("keep", "ledger_id")

    def __init__(self, ledger_id: int, keep: int) -> None:
        self.ledger_id = ledger_id
        self.keep = keep

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        conn.execute("DELETE FROM compacted_entries WHERE ledger_id = ? AND generation != ?",
                     (self.ledger_id, self.keep))

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger_id,)


class CompactedViews:
    """The storage side of compaction, over one Store (loop thread only)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def horizon(self, ledger_id: int) -> CompactedHorizon | None:
        raw = self._store.get_metadata(VIEW_KEY + str(ledger_id))
        return None if raw is None else CompactedHorizon.decode(raw)

    def read(self, ledger_id: int, view: CompactedHorizon, start: int, limit: int) -> list[Entry]:
        """Entries of the view with entry id >= start, in entry order, at most `limit`."""
        reader = self._store._reader
        if reader is None:
            raise StoreClosedError("store is not open")
        out: list[Entry] = []
        for eid, pt, nm, data in reader.execute(_READ, (ledger_id, view.generation, start, limit)).fetchall():
            checked = self._checked(ledger_id, int(eid), bytes(data), bool(out))
            if checked is None:  # damaged after good ones: those first, the next read raises
                break
            out.append(Entry(Position(ledger_id, int(eid)), checked, int(nm), int(pt)))
        return out

    def _checked(self, ledger_id: int, entry_id: int, data: bytes, after_good: bool) -> bytes | None:
        store = self._store
        return read_checked(store._payloads, store._ledgers, ledger_id, entry_id, data, after_good)

    def last(self, ledger_id: int, view: CompactedHorizon) -> Entry | None:
        reader = self._store._reader
        if reader is None:
            raise StoreClosedError("store is not open")
        row = reader.execute(
            "SELECT entry_id, publish_time, num_messages, data FROM compacted_entries "
            "WHERE ledger_id = ? AND generation = ? ORDER BY entry_id DESC LIMIT 1",
            (ledger_id, view.generation)).fetchone()
        if row is None:
            return None
        data = self._checked(ledger_id, int(row[0]), bytes(row[3]), False)
        assert data is not None  # a damaged entry raised
        return Entry(Position(ledger_id, int(row[0])), data, int(row[2]), int(row[1]))

    def bytes_after(self, ledger_id: int, entry_id: int) -> int:
        """Bytes of the ledger's stored entries after `entry_id` (the compaction backlog)."""
        reader = self._store._reader
        if reader is None:
            raise StoreClosedError("store is not open")
        row = reader.execute("SELECT COALESCE(SUM(size), 0) FROM entries WHERE ledger_id = ? AND entry_id > ?",
                             (ledger_id, entry_id)).fetchone()
        return int(row[0])

    def read_one(self, ledger_id: int, view: CompactedHorizon, entry_id: int) -> Entry | None:
        found = self.read(ledger_id, view, entry_id, 1)
        return found[0] if found and found[0].entry_id == entry_id else None

    async def discard_unfinished(self, ledger_id: int) -> None:
        """Delete the rows of generations not in force (a compaction that did not finish)."""
        view = self.horizon(ledger_id)
        await self._store._submit([_KeepOnlyOp(ledger_id, view.generation if view else -1)], None)

    async def write_chunk(self, ledger_id: int, generation: int, entries: Sequence[Entry]) -> None:
        if entries:
            await self._store._submit([_ChunkOp(ledger_id, generation, entries)], None)

    async def switch(self, ledger_id: int, view: CompactedHorizon) -> None:
        """Make `view` (whose rows are written) the view in force, atomically."""
        await self._store._submit(
            [self._store._metadata_op(VIEW_KEY + str(ledger_id), view.encode()),
             _KeepOnlyOp(ledger_id, view.generation)], None)

    async def forget(self, ledger_id: int) -> None:
        """The ledger is gone: drop its view pointer (its rows go with DeleteLedgerOp)."""
        if self.horizon(ledger_id) is not None:
            await self._store.put_metadata(VIEW_KEY + str(ledger_id), None)
