# Many rows in few statements, for the writer thread. sqlite3 lets go of the GIL around
# every statement step and takes it back after, so executemany() gives the event loop the
# GIL and waits to get it back once per ROW (up to the interpreter's switch interval each
# time while the loop is busy); a statement of many rows does that once per statement.
# `execute_rows` runs `head VALUES (?, ...), (?, ...) ... tail` in statements of up to
# ROWS_PER_STATEMENT rows (then 32, 16, ... 1 for the rest), in order; `delete_keys` runs
# `DELETE ... WHERE <prefix> AND <column> IN (?, ...)` the same way.
from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any

ROWS_PER_STATEMENT = 64


@functools.lru_cache(maxsize=256)
def _values_sql(head: str, ncols: int, tail: str, n: int) -> str:
    one = "(" + ", ".join("?" * ncols) + ")"
    return f"{head} VALUES {', '.join([one] * n)}{tail}"


@functools.lru_cache(maxsize=64)
def _in_sql(head: str, n: int) -> str:
    return f"{head} IN ({', '.join('?' * n)})"


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


def delete_keys(conn: sqlite3.Connection, head: str, prefix: Sequence[Any], keys: Sequence[Any]) -> None:
    """`head` (a DELETE whose WHERE ends with the column the keys are of, the parameters
    of the rest being `prefix`) for every key, in a few statements."""
    for i, n in _chunks(len(keys)):
        conn.execute(_in_sql(head, n), [*prefix, *keys[i:i + n]])
