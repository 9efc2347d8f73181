# Exceptions raised by the storage layer. Everything derives from StorageError.
from __future__ import annotations

import sqlite3


class StorageError(Exception):
    """Base class of storage failures."""


class StoreClosedError(StorageError):
    """The store is not started, or is closing/closed."""


class LedgerClosedError(StorageError):
    """The ledger was deleted, or fenced after a write failed for a reason other than a
    storage fault (reopen the store to recover)."""


class LedgerRecovering(StorageError):
    """A write to the ledger failed on a storage fault; it accepts appends again as soon as
    the appends in flight have failed too (milliseconds). Retry."""


class StorageFault(StorageError):
    """The database refused a write (disk full, I/O error, read-only): retry later."""


class DataDirDamaged(StorageError):
    """A data file failed an integrity check at start-up: the message names the file, what is
    damaged and what to do. The broker does not start on it (nothing is changed on disk)."""


class CorruptEntry(StorageError):
    """A stored entry failed its checksum when read: it is never served. The message names the
    topic, the entry, the file holding it and what to do."""


def is_storage_fault(exc: BaseException) -> bool:
    """A failure of the storage medium (the write may succeed later), as opposed to a bug
    or a constraint violation."""
    return isinstance(exc, sqlite3.OperationalError | StorageFault | LedgerRecovering)


def is_read_only(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorcode", 0) & 0xFF == 8 or "readonly" in str(exc)
    )


def as_storage_error(exc: BaseException) -> BaseException:
    """Callers above storage catch StorageError: a database error becomes StorageFault."""
    if isinstance(exc, sqlite3.Error) and not isinstance(exc, StorageError):
        fault = StorageFault(str(exc))
        fault.__cause__ = exc
        return fault
    return exc
