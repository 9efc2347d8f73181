# The checks a store runs on its data dir before it serves anything (Store.start), after
# making the data dir's own name durable (its parent is fsynced: a new data dir survives a
# power cut):
#   1. the WAL (integrity.scan_wal), before any read-write connection opens it: a frame that
#      fails its checksum with fsynced commits after it refuses the start (SQLite would drop
#      them silently and the next checkpoint would make that final); a torn last transaction
#      (a crash or power cut during its commit: never acknowledged) is logged and replayed away;
#   2. the writer opens the database (SQLite replays the WAL), then `PRAGMA quick_check` on the
#      reader connection (a read-only connection cannot replay a WAL whose index is gone);
#   3. the recovery load (schema.load_state): a gap in a ledger's entry ids refuses the start;
#   4. every payload file a row names: present, with the size the row records (a stat each;
#      their contents are checked by CRC32C when read and by `letterbox verify`).
# Time bound: the WAL scan reads the WAL at about 25 MB/s (it is at most ~64 MB after a crash;
# a clean stop leaves none); quick_check reads every page of letterbox.db once (docs/operations.md
# has the measured rate). Every failure is DataDirDamaged naming the file and what to do.
# Invariant: a start refused by the WAL check has written nothing to the data dir; later
# checks run after SQLite's own recovery, which writes only what a normal start writes.
from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from pathlib import Path
from typing import Protocol

from .errors import DataDirDamaged
from .integrity import WHAT_TO_DO, scan_wal
from .payload_files import PayloadFiles
from .schema import RecoveredState, db_path, load_state, open_reader

log = logging.getLogger(__name__)
QUICK_CHECK_ROWS = 20  # problems named in a refusal


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def open_checked(data_dir: Path, writer: _Startable,
                       payloads: PayloadFiles) -> tuple[sqlite3.Connection, RecoveredState]:
    """Check the data dir, start `writer`, and return the reader connection and the recovered
    state; raises DataDirDamaged (the writer not started) when a check fails."""
    path = db_path(data_dir)
    what = WHAT_TO_DO.format(dir=data_dir)
    await asyncio.to_thread(_sync_name, data_dir)
    damage = await asyncio.to_thread(scan_wal, Path(f"{path}-wal"))
    if damage is not None and damage.certain:
        raise DataDirDamaged(f"{damage.describe()}, transactions that were committed; {what} "
                             f"(or move {damage.path.name} aside to start without them)")
    if damage is not None:
        log.warning("%s: the last transaction of the write-ahead log is incomplete (a crash or power cut during "
                    "its commit, which was never acknowledged): SQLite replays the log without it", damage.path)
    try:
        await writer.start()
    except sqlite3.DatabaseError as exc:
        raise DataDirDamaged(f"{path}: {exc}; {what}") from None
    reader = None
    try:
        reader = open_reader(path)
        problems = await asyncio.to_thread(quick_check, reader)
        if problems:
            raise DataDirDamaged(f"{path} fails PRAGMA quick_check ({'; '.join(problems[:3])}); {what}")
        state = await asyncio.to_thread(load_state, reader)
        missing = await asyncio.to_thread(check_payload_files, reader, payloads, state)
        if missing:
            raise DataDirDamaged(f"{len(missing)} payload files are missing or not of their size "
                                 f"({'; '.join(missing[:3])}); {what}")
    except (sqlite3.DatabaseError, DataDirDamaged) as exc:
        if reader is not None:
            reader.close()
        await writer.stop()
        if isinstance(exc, DataDirDamaged):
            raise DataDirDamaged(f"{exc}; {what}" if what not in str(exc) else str(exc)) from None
        raise DataDirDamaged(f"{path}: {exc}; {what}") from None
    return reader, state


def quick_check(conn: sqlite3.Connection) -> list[str]:
    """PRAGMA quick_check's problems (empty: none)."""
    try:
        rows = conn.execute(f"PRAGMA quick_check({QUICK_CHECK_ROWS})").fetchall()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [str(r[0]) for r in rows if r[0] != "ok"]


def check_payload_files(reader: sqlite3.Connection, payloads: PayloadFiles, state: RecoveredState) -> list[str]:
    """Each payload file a row names that is missing or not of the row's size, named with its
    topic and entry."""
    names = {led.ledger_id: led.name for led in state.ledgers}
    bad: list[str] = []
    for lid, eid, size, name in reader.execute(
            "SELECT ledger_id, entry_id, size, data FROM entries WHERE typeof(data) = 'text'"):
        try:
            actual = os.stat(payloads.directory / name).st_size
        except OSError:
            actual = -1
        if actual != size:
            found = "missing" if actual < 0 else f"{actual} bytes, not {size}"
            bad.append(f"{payloads.directory / name} ({found}): entry {eid} of topic {names.get(lid, lid)}")
    return bad


def _sync_name(data_dir: Path) -> None:
    """Make the data dir's own name durable (a new one's entry in its parent directory)."""
    try:
        fd = os.open(data_dir.resolve().parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
