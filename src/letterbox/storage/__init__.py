# letterbox.storage: durable ledgers (entries) and cursors (subscription state) in one SQLite
# database per data dir. See store.py for the threading/durability model.
from .entry import Entry
from .errors import LedgerClosedError, StorageError, StoreClosedError
from .managed_cursor import ManagedCursor
from .managed_ledger import ManagedLedger
from .position import Position
from .store import Store, SyncMode

__all__ = [
    "Entry",
    "LedgerClosedError",
    "ManagedCursor",
    "ManagedLedger",
    "Position",
    "StorageError",
    "Store",
    "StoreClosedError",
    "SyncMode",
]
