# Many rows in few statements, for the writer thread. sqlite3 lets go of the GIL around
# every statement step and takes it back after, so executemany() gives the event loop the
# GIL and waits to get it back once per ROW (up to the interpreter's switch interval, 5 ms,
# each time while the loop is busy); a statement of many rows does that once per statement.
# `execute_rows` runs `head VALUES (?, ...), (?, ...) ... tail` in statements of up to
# ROWS_PER_STATEMENT rows (then 256, 128, ... 1 for the rest), in order. Rows of plain
# values (no blobs) go in ONE statement whatever their number: `json_rows` passes them as
# one JSON array that SQLite reads with json_each (`json_values` names its columns), and
# `delete_json_keys` deletes by a JSON array of keys.
from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

ROWS_PER_STATEMENT = 512


@functools.lru_cache(maxsize=256)
def _values_sql(head: str, ncols: int, tail: str, n: int) -> str:
    one = "(" + ", ".join("?" * ncols) + ")"
    return f"{head} VALUES {', '.join([one] * n)}{tail}"


def _chunks(count: int) -> list[tuple[int, int]]:
    """(start, length) of each statement for `count` rows."""
    out = []
    i, left = 0, count
    while left:
        n = ROWS_PER_STATEMENT if left >= ROWS_PER_STATEMENT else 1 << (left.bit_length() - 1)
        out.append((i, n))
        i += n
        left -= n
    return out


def execute_rows(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
    """`head` (an INSERT naming its columns) for every row, in order, in a few statements;
    `tail` follows the VALUES (an ON CONFLICT clause)."""
    if not rows:
        return
    ncols = len(rows[0])
    for i, n in _chunks(len(rows)):
        conn.execute(_values_sql(head, ncols, tail, n), [v for row in rows[i:i + n] for v in row])


def json_values(ncols: int) -> str:
    """The select list of json_rows' statements: the columns of each row of the array."""
    return ", ".join(f"json_extract(value, '$[{i}]')" for i in range(ncols))


def json_rows(conn: sqlite3.Connection, sql: str, prefix: Sequence[Any], rows: Sequence[Sequence[Any]]) -> None:
    """`sql` (`INSERT ... SELECT <prefix params>, json_values(n) FROM json_each(?) WHERE true
    ...`) with `rows` as one JSON array: one statement for all of them. Values: ints, strs
    and None only."""
    if rows:
        conn.execute(sql, (*prefix, json.dumps(rows, separators=(",", ":"))))


def delete_json_keys(conn: sqlite3.Connection, head: str, prefix: Sequence[Any], keys: Sequence[Any]) -> None:
    """`head` (a DELETE whose WHERE ends with the column the keys are of, the parameters of
    the rest being `prefix`) for every key, in one statement."""
    if keys:
        conn.execute(f"{head} IN (SELECT value FROM json_each(?))", (*prefix, json.dumps(keys)))
