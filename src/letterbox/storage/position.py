# Position: the address of one entry, (ledger_id, entry_id), ordered lexicographically.
# Invariant: entry_id >= -1; entry_id == -1 means "before the first entry of the ledger"
# (e.g. the mark-delete position of a fresh cursor on an empty ledger).
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Position:
    ledger_id: int
    entry_id: int

    def next(self) -> Position:
        return Position(self.ledger_id, self.entry_id + 1)

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"
