# Backup and restore of a data dir, read from the files (a running broker is not asked).
#
# Backup order, so that everything the copied database references is in the copy:
#   1. copy the payload files present now (a payload file is written once and never changed:
#      a copy taken at any moment is the file);
#   2. copy letterbox.db with SQLite's online backup API in ONE step: one read transaction, so
#      the copy is the database as of one commit, while the broker keeps writing (WAL);
#   3. copy the payload files the copied database names that step 1 did not see (written
#      since); one removed meanwhile (its entries trimmed after step 2) means the copy would
#      lack it, so steps 2-3 run again; files the copy does not name are not kept.
# Every receipted message is in the copy: a receipt follows its commit, and step 2 reads
# the last commit made before it began.
# Restore copies a backup into a data dir no broker holds (its lock), refusing a non-empty
# one unless forced; forced, the files it replaces are moved aside, never deleted.
# Invariants: the source data dir is only read; every file of a copy is fsynced before the
# backup (restore) reports success.
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from .data_dir_lock import LOCK_FILE
from .errors import StorageError
from .schema import db_path

PAYLOADS = "payloads"
MANIFEST = "letterbox-backup.json"
ATTEMPTS = 5


class BackupError(StorageError):
    """A backup or restore cannot be made; the message says why and what to do."""


@dataclass(frozen=True)
class BackupResult:
    dest: Path
    db_bytes: int
    payload_files: int
    payload_bytes: int
    seconds: float


def backup_data_dir(source: Path, dest: Path) -> BackupResult:
    start = time.monotonic()
    src_db = db_path(source)
    if not src_db.is_file():
        raise BackupError(f"{source} holds no letterbox.db: give the broker's --data-dir")
    if dest.exists() and not dest.is_dir():
        raise BackupError(f"{dest} is a file: give a new or empty directory")
    if dest.exists() and any(dest.iterdir()):
        raise BackupError(f"{dest} is not empty: give a new or empty directory")
    (dest / PAYLOADS).mkdir(parents=True, exist_ok=True)
    src_payloads = source / PAYLOADS
    copied: set[str] = set()
    for path in sorted(src_payloads.iterdir()) if src_payloads.is_dir() else []:
        if _copy_file(path, dest / PAYLOADS / path.name):
            copied.add(path.name)
    dest_db = db_path(dest)
    for _ in range(ATTEMPTS):
        _online_copy(src_db, dest_db)
        wanted = _named_payloads(dest_db)
        if all(name in copied or _copy_file(src_payloads / name, dest / PAYLOADS / name) for name in wanted):
            break
    else:
        raise BackupError(f"payload files of {source} kept disappearing while it was copied (trims); try again")
    nbytes = 0
    for name in os.listdir(dest / PAYLOADS):
        if name not in wanted:
            os.unlink(dest / PAYLOADS / name)
        else:
            nbytes += os.stat(dest / PAYLOADS / name).st_size
    _sync_dir(dest / PAYLOADS)
    manifest = {"source": str(source.resolve()), "taken_at_ms": int(time.time() * 1000),
                "payload_files": len(wanted)}
    (dest / MANIFEST).write_text(json.dumps(manifest) + "\n")
    _sync_dir(dest)
    return BackupResult(dest, dest_db.stat().st_size, len(wanted), nbytes, time.monotonic() - start)


def restore_data_dir(backup: Path, data_dir: Path, force: bool = False) -> Path | None:
    """Copy `backup` into `data_dir` (whose lock the caller holds). Returns where the files it
    replaced were moved (None: there were none)."""
    if not backup.is_dir() or not db_path(backup).is_file() or not (backup / MANIFEST).is_file():
        raise BackupError(f"{backup} is not a backup made by `letterbox backup` (no letterbox.db or {MANIFEST})")
    if data_dir.exists() and not data_dir.is_dir():
        raise BackupError(f"{data_dir} is a file: give the data dir to restore into")
    present = [p for p in data_dir.iterdir() if p.name != LOCK_FILE] if data_dir.is_dir() else []
    aside = None
    if present and not force:
        raise BackupError(f"{data_dir} is not empty: restore into an empty directory, or add --force "
                          "(the files there are moved aside, not deleted)")
    if present:
        aside = data_dir.with_name(f"{data_dir.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
        aside.mkdir()
        for p in present:
            os.rename(p, aside / p.name)
    (data_dir / PAYLOADS).mkdir(parents=True, exist_ok=True)
    for path in sorted((backup / PAYLOADS).iterdir()) if (backup / PAYLOADS).is_dir() else []:
        _copy_file(path, data_dir / PAYLOADS / path.name)
    _copy_file(db_path(backup), db_path(data_dir))
    _sync_dir(data_dir / PAYLOADS)
    _sync_dir(data_dir)
    return aside


def _online_copy(src_db: Path, dest_db: Path) -> None:
    """SQLite's online backup of src_db into dest_db, in one step (one read transaction)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dest_db}{suffix}").unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{src_db}?mode=ro", uri=True, isolation_level=None)
    try:
        dst = sqlite3.connect(dest_db, isolation_level=None)
        try:
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
    finally:
        src.close()
    fd = os.open(dest_db, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _named_payloads(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        return {str(r[0]) for r in conn.execute("SELECT data FROM entries WHERE typeof(data) = 'text'")}
    finally:
        conn.close()


def _copy_file(src: Path, dest: Path) -> bool:
    """Copy and fsync one file; False if `src` is gone."""
    try:
        shutil.copyfile(src, dest)
    except FileNotFoundError:
        return False
    fd = os.open(dest, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
