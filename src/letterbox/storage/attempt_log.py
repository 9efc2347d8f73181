# The delivery attempt log of one subscription (issue 14, item 1): entry id ->
# that entry's failed deliveries, as one compact JSON text per entry (rows
# written by letterbox.failure.attempts; this module does not read them).
# It is part of the subscription's persisted state record (delivery_state.py
# splices it into the cursor record as `"a":[[entry,[rows...]],...]`), so it
# is written with the counts it goes with, in one storage transaction, and
# survives a kill -9 whenever the count does.
# Memory: one str per entry that failed at least once (the rows are bounded by
# the broker's attempt_log_size); nothing for entries that never failed.
# Invariants: no key is an acknowledged entry (forget / forget_through run
# with the cursor's acks); `_fragment` is the serialized form while unchanged:
# mutate through the methods only.
from __future__ import annotations

import json
from typing import Any


class AttemptLog:
    __slots__ = ("_fragment", "rows")

    def __init__(self) -> None:
        self.rows: dict[int, str] = {}
        self._fragment: str | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, entry_id: int) -> str | None:
        return self.rows.get(entry_id)

    def set(self, entry_id: int, text: str) -> None:
        self.rows[entry_id] = text
        self._fragment = None

    def forget(self, entry_id: int) -> None:
        if self.rows.pop(entry_id, None) is not None:
            self._fragment = None

    def forget_through(self, entry_id: int) -> None:
        rows = self.rows
        if rows and min(rows) <= entry_id:
            for k in [k for k in rows if k <= entry_id]:
                del rows[k]
            self._fragment = None

    def clear(self) -> None:
        if self.rows:
            self.rows.clear()
            self._fragment = None

    def copy(self) -> AttemptLog:
        c = AttemptLog()
        c.rows = dict(self.rows)
        c._fragment = self._fragment
        return c

    def fragment(self) -> str:
        """`"a":[[entry,rows],...]` ("" when empty), spliced into the record as is."""
        if self._fragment is None:
            rows = self.rows
            self._fragment = (
                '"a":[' + ",".join(f"[{e},{rows[e]}]" for e in sorted(rows)) + "]" if rows else ""
            )
        return self._fragment

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> AttemptLog:
        """Read `"a"` of a record (absent in records written before the log existed)."""
        log = cls()
        for e, rows in doc.get("a", []):
            log.rows[int(e)] = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
        return log
