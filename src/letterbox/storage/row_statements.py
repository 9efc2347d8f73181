# Many rows in few statements, for the writer thread. sqlite3 lets go of the GIL around
# every statement step and takes it back after, so executemany() gives the event loop the
# GIL and waits to get it back once per ROW (up to the interpreter's switch interval, 5 ms,
# each time while the loop is busy); a statement of many rows does that once per statement.
# `execute_rows` runs `head VALUES (?, ...), (?, ...) ... tail` in statements of up to
# ROWS_PER_STATEMENT rows (then 256, 128, ... 1 for the rest), in order; its parameters
# bind straight to the columns (rows passed as one JSON array read with json_each instead
# cost SQLite about half as much again: each value is parsed out of the text). Keys to
# delete go in one statement whatever their number: `delete_json_keys` passes them as a
# JSON array.
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


def execute_rows(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "",
                 prefix: Sequence[Any] = ()) -> None:
    """`head` (an INSERT naming its columns) for every row, in order, in a few statements;
    `tail` follows the VALUES (an ON CONFLICT clause). `prefix` goes in front of every row
    (the columns all the rows share), bound once per row without a tuple made for it."""
    if not rows:
        return
    ncols = len(prefix) + len(rows[0])
    for i, n in _chunks(len(rows)):
        params: list[Any] = []
        add = params.extend
        if prefix:
            for row in rows[i:i + n]:
                add(prefix)
                add(row)
        else:  # the appends' entry rows: one extend per row, nothing else
            for row in rows[i:i + n]:
                add(row)
        conn.execute(_values_sql(head, ncols, tail, n), params)


def delete_json_keys(conn: sqlite3.Connection, head: str, prefix: Sequence[Any], keys: Sequence[Any]) -> None:
    """`head` (a DELETE whose WHERE ends with the column the keys are of, the parameters of
    the rest being `prefix`) for every key, in one statement."""
    if keys:
        conn.execute(f"{head} IN (SELECT value FROM json_each(?))", (*prefix, json.dumps(keys)))
