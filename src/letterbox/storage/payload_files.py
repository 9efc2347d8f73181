# PayloadFiles: the payloads of large entries, one file each under <data_dir>/payloads/.
#
# An entry whose data is at least LARGE_PAYLOAD_BYTES is not stored inside its SQLite row: the
# payload lane (payload_lane.py) writes it to a file of its own and the row's `data` column
# holds the file's name as TEXT instead of the payload as a BLOB (schema.py). The name is
# "<ledger_id>-<entry_id>-<random>.payload", never reused, so a file is only ever written once.
#
# Invariants:
#   * a row names a file only after the file's bytes and its directory entry are durable
#     (fsync of both, and of the data dir once payloads/ is created, unless the sync mode is
#     "off"): a committed row never points at a missing or short file, even after a power cut;
#   * files are removed only after the commit that deleted their rows (trim, ledger delete)
#     or after their row failed to commit; a crash in between leaves a file no row names,
#     which sweep() removes when the store starts (before any new payload is written).
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from .errors import StorageFault

log = logging.getLogger(__name__)

# entries this large are written outside the group commit (a 5 MB entry costs a commit
# ~54 ms of WAL write + fsync on a disk doing ~100 MB/s; one file fsync costs ~8-10 ms here
# up to 1 MiB, so smaller entries are cheaper inside the group commit)
LARGE_PAYLOAD_BYTES = 1024 * 1024
SUFFIX = ".payload"


class PayloadFiles:
    def __init__(self, directory: Path, durable: bool = True, large_bytes: int = LARGE_PAYLOAD_BYTES) -> None:
        self.directory = directory
        self.durable = durable  # False: sync mode "off" (no fsync, like SQLite's)
        self.large_bytes = large_bytes  # entries of at least this size are stored here

    def new_name(self, ledger_id: int, entry_id: int) -> str:
        return f"{ledger_id}-{entry_id}-{secrets.token_hex(6)}{SUFFIX}"

    def write(self, name: str, data: bytes) -> None:
        """Write one payload file and fsync it (the directory is synced by sync_directory)."""
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.durable:  # the directory's own name, in the data dir, before any file in it counts
                _fsync_directory(self.directory.parent)
        fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def sync_directory(self) -> None:
        """Make the names of the files written so far durable."""
        if self.durable:
            _fsync_directory(self.directory)

    def read(self, name: str) -> bytes:
        try:
            with open(self.directory / name, "rb") as f:
                return f.read()
        except OSError as exc:
            raise StorageFault(f"cannot read the payload file {name} of a stored entry: {exc}") from exc

    def remove(self, names: Iterable[str]) -> None:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / name)

    def sweep(self, reader: sqlite3.Connection) -> int:
        """Remove the files no row names (left by a crash between a payload's write and its
        row's commit, or between a trim's commit and the removal). Returns how many."""
        if not self.directory.is_dir():
            return 0
        orphans = []
        for path in self.directory.iterdir():
            if not path.is_file():
                continue
            name = path.name
            ids = name.split("-", 2)
            named = None
            if name.endswith(SUFFIX) and len(ids) == 3 and ids[0].isdigit() and ids[1].isdigit():
                named = reader.execute(
                    "SELECT 1 FROM entries WHERE ledger_id = ? AND entry_id = ? AND data = ?",
                    (int(ids[0]), int(ids[1]), name)).fetchone()
            if named is None:
                orphans.append(name)
        self.remove(orphans)
        if orphans:
            self.sync_directory()
            log.info("removed %d payload files no stored entry names (left by a crash)", len(orphans))
        return len(orphans)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
