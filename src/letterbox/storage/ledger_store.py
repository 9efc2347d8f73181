# LedgerStore: what a ManagedLedger (and, through it, its cursors) uses of the Store that
# owns it -- the write queue, the shared tail cache, the read connection and the dirty-cursor
# list. Store implements it; the Protocol keeps managed_ledger.py from importing store.py
# (which imports it). Storage-internal: code above storage uses Store's public methods.
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, TypeVar

from .cache import EntryCache, Row
from .managed_cursor import ManagedCursor
from .ops import Then, WriteOp
from .payload_files import PayloadFiles

T = TypeVar("T")


class LedgerStore(Protocol):
    """What a ledger uses of its store (Store implements it; storage-internal)."""

    trim_interval: float
    _cache: EntryCache
    _loop: asyncio.AbstractEventLoop | None
    _payloads: PayloadFiles  # its large_bytes: the payload lane's threshold (append_run.py)

    def _check_open(self) -> object: ...  # raises StoreClosedError unless open

    def _submit(self, ops: Sequence[WriteOp], result: T) -> asyncio.Future[T]: ...

    def _submit_then(self, ops: Sequence[WriteOp], then: Then) -> None: ...

    def _submit_background(self, ops: Sequence[WriteOp]) -> None: ...

    def _cursor_dirty(self, cursor: ManagedCursor) -> None: ...

    def _cursor_clean(self, cursor: ManagedCursor) -> None: ...

    def _storage_fault(self, exc: BaseException) -> None: ...

    def _read_range(
        self, ledger_id: int, first: int, last: int, max_bytes: int, out: list[Row]
    ) -> int: ...

    def _read_publish_time(self, ledger_id: int, entry_id: int) -> int | None: ...

    def _first_entries_over(self, ledger_id: int, first: int, last: int, nbytes: int) -> int: ...

    def _sum_sizes(self, ledger_id: int, first: int, last: int) -> int: ...
