# SQLite schema, connection setup and the recovery loader.
#
# Tables (one database file per data dir):
#   counters(name, value)          -- 'next_ledger_id': ledger ids are never reused
#   ledgers(name, ledger_id, first_entry_id)
#                                  -- first_entry_id is the trim watermark: every entry below
#                                     it was deleted; it keeps next-entry-id correct even when
#                                     all entries of a ledger were trimmed
#   entries(rowid, ledger_id, entry_id, publish_time, num_messages, size, data)
#                                  -- rowid table (entries may be 100 KB blobs), UNIQUE index
#                                     on (ledger_id, entry_id); `data` is the LAST column so
#                                     metadata scans never read blob overflow pages
#   producer_seq(ledger_id, producer_name, sequence_id)  -- dedup state, same txn as entry
#   cursors(ledger_id, name, state) -- one record per cursor: mark-delete, ack ranges, batch
#                                     ack sets, properties (cursor_record.py)
#   deliveries(ledger_id, cursor, entry_id, count, first_ms, last_ms, due_ms, index_counts)
#                                  -- the delivery state of each unacked entry that has a count,
#                                     batch-index counts or a backoff in a cursor, written with
#                                     the cursor's record (delivery_rows.py)
#   attempt_logs(ledger_id, cursor, entry_id, attempts)
#                                  -- the delivery attempt log of each entry that failed in a
#                                     cursor, written with the cursor's record (attempt_log.py)
#   metadata(key, value)
#   compacted_entries(ledger_id, generation, entry_id, publish_time, num_messages, data)
#                                  -- compacted views of topics (compaction.py): copies of
#                                     the entries holding each key's latest value
# Invariant: per ledger, stored entry ids are contiguous from first_entry_id (trim removes a
# prefix only); the loader refuses a gap (DataDirDamaged): only a damaged file makes one.
from __future__ import annotations

import sqlite3
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .delivery_rows import SELECT_LEDGER, rows_by_cursor
from .delivery_rows import Row as DeliveryRow
from .errors import DataDirDamaged

SyncMode = Literal["full", "normal", "off"]

DDL = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters (name, value) VALUES ('next_ledger_id', 1);
CREATE TABLE IF NOT EXISTS ledgers (
    name TEXT PRIMARY KEY,
    ledger_id INTEGER NOT NULL UNIQUE,
    first_entry_id INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entries (
    ledger_id INTEGER NOT NULL,
    entry_id INTEGER NOT NULL,
    publish_time INTEGER NOT NULL,
    num_messages INTEGER NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_pos ON entries (ledger_id, entry_id);
CREATE TABLE IF NOT EXISTS producer_seq (
    ledger_id INTEGER NOT NULL,
    producer_name TEXT NOT NULL,
    sequence_id INTEGER NOT NULL,
    PRIMARY KEY (ledger_id, producer_name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cursors (
    ledger_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (ledger_id, name)
);
CREATE TABLE IF NOT EXISTS metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attempt_logs (
    ledger_id INTEGER NOT NULL,
    cursor TEXT NOT NULL,
    entry_id INTEGER NOT NULL,
    attempts TEXT NOT NULL,
    PRIMARY KEY (ledger_id, cursor, entry_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    ledger_id INTEGER NOT NULL,
    cursor TEXT NOT NULL,
    entry_id INTEGER NOT NULL,
    count INTEGER NOT NULL,
    first_ms INTEGER,
    last_ms INTEGER,
    due_ms INTEGER,
    index_counts TEXT,
    PRIMARY KEY (ledger_id, cursor, entry_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS compacted_entries (
    ledger_id INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    entry_id INTEGER NOT NULL,
    publish_time INTEGER NOT NULL,
    num_messages INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (ledger_id, generation, entry_id)
);
"""

_SYNC_PRAGMA = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


def db_path(data_dir: Path) -> Path:
    return data_dir / "letterbox.db"


def open_writer(path: Path, sync: SyncMode) -> sqlite3.Connection:
    """Open the writer connection (autocommit mode; the writer issues BEGIN/COMMIT)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA page_size=16384")  # only effective when the file is created
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={_SYNC_PRAGMA[sync]}")
    conn.execute("PRAGMA journal_size_limit=67108864")
    conn.execute("PRAGMA cache_size=-16384")
    conn.executescript(DDL)
    return conn


def open_reader(path: Path) -> sqlite3.Connection:
    """Open the read-only connection used on the event-loop thread (and for recovery)."""
    conn = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA query_only=1")
    conn.execute("PRAGMA cache_size=-16384")
    return conn


@dataclass
class RecoveredLedger:
    name: str
    ledger_id: int
    first_entry_id: int
    next_entry_id: int
    cum_messages: array[int]  # cum_messages[i] = messages in entries first..first+i
    size_bytes: int
    sequences: dict[str, int] = field(default_factory=dict)
    cursors: list[tuple[str, bytes]] = field(default_factory=list)
    attempts: dict[str, dict[int, str]] = field(default_factory=dict)  # cursor -> entry -> log
    deliveries: dict[str, list[DeliveryRow]] = field(default_factory=dict)  # cursor -> its delivery rows


@dataclass
class RecoveredState:
    next_ledger_id: int
    ledgers: list[RecoveredLedger]
    metadata: dict[str, str]


def load_state(conn: sqlite3.Connection) -> RecoveredState:
    """Read everything needed to rebuild in-memory state. O(entries) on metadata columns."""
    row = conn.execute("SELECT value FROM counters WHERE name = 'next_ledger_id'").fetchone()
    next_ledger_id = int(row[0]) if row else 1
    ledgers: list[RecoveredLedger] = []
    rows = conn.execute("SELECT name, ledger_id, first_entry_id FROM ledgers ORDER BY ledger_id")
    for name, lid, first in rows.fetchall():
        cum: array[int] = array("q")
        total = 0
        size = 0
        expected = first
        cur = conn.execute(
            "SELECT entry_id, num_messages, size FROM entries "
            "WHERE ledger_id = ? AND entry_id >= ? ORDER BY entry_id",
            (lid, first),
        )
        for eid, nm, sz in cur:
            if eid != expected:
                raise DataDirDamaged(f"topic {name} (ledger {lid}) misses entries {expected}..{eid - 1} in {db_path_of(conn)}")
            total += nm
            size += sz
            cum.append(total)
            expected += 1
        led = RecoveredLedger(name, lid, first, expected, cum, size)
        for prod, seq in conn.execute(
            "SELECT producer_name, sequence_id FROM producer_seq WHERE ledger_id = ?", (lid,)
        ):
            led.sequences[prod] = seq
        for cname, state in conn.execute(
            "SELECT name, state FROM cursors WHERE ledger_id = ? ORDER BY name", (lid,)
        ):
            led.cursors.append((cname, bytes(state)))
        if _has_table(conn, "attempt_logs"):  # a data dir the writer has not opened yet has none
            for cname, eid, text in conn.execute(
                "SELECT cursor, entry_id, attempts FROM attempt_logs WHERE ledger_id = ?", (lid,)
            ):
                led.attempts.setdefault(cname, {})[int(eid)] = str(text)
        if _has_table(conn, "deliveries"):
            led.deliveries = rows_by_cursor(conn.execute(SELECT_LEDGER, (lid,)))
        ledgers.append(led)
        next_ledger_id = max(next_ledger_id, lid + 1)
    metadata = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
    return RecoveredState(next_ledger_id, ledgers, metadata)


def db_path_of(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "letterbox.db"


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None
