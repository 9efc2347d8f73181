# Exceptions raised by the storage layer. Everything derives from StorageError.
from __future__ import annotations


class StorageError(Exception):
    """Base class of storage failures."""


class StoreClosedError(StorageError):
    """The store is not started, or is closing/closed."""


class LedgerClosedError(StorageError):
    """The ledger was deleted, or fenced after a failed write (reopen the store to recover)."""
