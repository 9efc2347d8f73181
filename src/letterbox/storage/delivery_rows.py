# The rows of the table `deliveries` (schema.py): one per unacknowledged entry of a
# durable subscription that has a redelivery count, batch-index counts or a pending
# backoff (delivery_state.py), keyed by (ledger_id, cursor, entry_id):
#   count         the entry's redelivery count (0 when only a backoff or index counts)
#   first_ms, last_ms   its first and last delivery times (NULL: none known)
#   due_ms        when its pending backoff ends (NULL: none)
#   index_counts  JSON [[batch index, count], ...] of its acknowledged batch messages (NULL: none)
# A cursor write carries the rows of the entries that changed since its last write
# (DeliveryChanges, built on the loop thread when the write op is made), applied by the
# writer in the same transaction as the cursor's record (multi-row statements,
# row_statements.py): a redelivery writes the rows of the entries it counted, never the
# whole delivery state.
# Invariant: after a write commits, the rows of a cursor are exactly its delivery state as
# of that write, for every entry the write or an earlier committed one named.
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from .row_statements import delete_json_keys, execute_rows

# (entry_id, count, first_ms, last_ms, due_ms, index_counts)
Row = tuple[int, int, int | None, int | None, int | None, str | None]

_UPSERT_HEAD = "INSERT INTO deliveries (ledger_id, cursor, entry_id, count, first_ms, last_ms, due_ms, index_counts)"
_UPSERT_TAIL = (
    " ON CONFLICT (ledger_id, cursor, entry_id) DO UPDATE SET count = excluded.count, first_ms = excluded.first_ms, "
    "last_ms = excluded.last_ms, due_ms = excluded.due_ms, index_counts = excluded.index_counts"
)
_DELETE = "DELETE FROM deliveries WHERE ledger_id = ? AND cursor = ? AND entry_id"
_DELETE_ALL = "DELETE FROM deliveries WHERE ledger_id = ? AND cursor = ?"
SELECT_LEDGER = (
    "SELECT cursor, entry_id, count, first_ms, last_ms, due_ms, index_counts FROM deliveries WHERE ledger_id = ?"
)


class DeliveryChanges:
    """What one cursor write does to the `deliveries` rows of its cursor."""

    __slots__ = ("deletes", "replace_all", "upserts")

    def __init__(self, upserts: list[Row], deletes: list[int], replace_all: bool = False) -> None:
        self.upserts = upserts
        self.deletes = deletes
        self.replace_all = replace_all  # delete every row of the cursor first

    def apply(self, conn: sqlite3.Connection, ledger_id: int, cursor: str) -> None:
        key = (ledger_id, cursor)
        if self.replace_all:
            conn.execute(_DELETE_ALL, key)
        delete_json_keys(conn, _DELETE, key, self.deletes)
        execute_rows(conn, _UPSERT_HEAD, self.upserts, _UPSERT_TAIL, prefix=key)


def delete_rows(conn: sqlite3.Connection, where: str, args: tuple[object, ...]) -> None:
    """Delete the rows of a ledger or cursor (`where` over ledger_id / cursor)."""
    conn.execute(f"DELETE FROM deliveries WHERE {where}", args)


def index_counts_text(per_index: dict[int, int] | None) -> str | None:
    if not per_index:
        return None
    return json.dumps(sorted(per_index.items()), separators=(",", ":"))


def index_counts_of(text: str | None) -> dict[int, int]:
    return {int(i): int(n) for i, n in json.loads(text)} if text else {}


def rows_by_cursor(rows: Iterable[tuple[Any, ...]]) -> dict[str, list[Row]]:
    """SELECT_LEDGER's result, grouped by cursor name."""
    out: dict[str, list[Row]] = {}
    for cname, e, n, first, last, due, ic in rows:
        out.setdefault(str(cname), []).append((int(e), int(n), _int(first), _int(last), _int(due),
                                               None if ic is None else str(ic)))
    return out


def _int(v: Any) -> int | None:
    return None if v is None else int(v)
