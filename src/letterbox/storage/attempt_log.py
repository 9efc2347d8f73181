# The delivery attempt log of one subscription: entry id ->
# that entry's failed deliveries (rows built by letterbox.failure.attempts).
# In memory an entry's log is a tuple of row tuples (`append` adds one without
# decoding or encoding anything) or, until it changes, the JSON text it was
# stored or set as; the JSON text of a changed entry is encoded once per write,
# by the writer thread (AttemptChanges.upserts): the tuples are immutable, so a
# write op holds them as they were when it was made.
# It belongs to the subscription's persisted state: a durable cursor writes
# the entries that changed since its last write (`take_changes`) in the SAME
# CursorWriteOp as its state record, into the table attempt_logs (one row per
# entry that failed), so the log commits with the counts in one storage
# transaction and survives a kill -9 whenever the count does, while a record
# write never rewrites the logs of entries that did not change.
# Records written before the table existed may carry the logs as `"a"`
# (from_doc reads them; they move to the table with the next write).
# Memory: one str or tuple of rows per entry that failed at least once (its rows bounded by the
# broker's attempt_log_size) and, for a durable cursor, the ids changed since
# the last write; nothing for entries that never failed.
# Invariants: no key is an acknowledged entry (forget / forget_through run
# with the cursor's acks); mutate through the methods only.
from __future__ import annotations

import functools
import json
from json.encoder import encode_basestring as _string_text  # a str as _encode writes it
from typing import Any

Row = tuple[Any, ...]
Rows = tuple[Row, ...]
Log = str | Rows  # JSON text as stored, or the rows themselves

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _value_text(v: Any) -> str:
    """_encode(v) for one value of a row: an int, a str or None written directly."""
    if v is None:
        return "null"
    t = type(v)
    if t is int:
        return int.__repr__(v)
    if t is str:
        return _string_text(v)
    return _encode(v)


def _fast_row_text(row: Row) -> str:
    """_encode(row), written without the encoder's per-call set-up for the usual row
    (six values, each an int, a str or None; anything else through _encode)."""
    if len(row) != 6:
        return _encode(row)
    d, e, c, a, n, r = row
    return f"[{_value_text(d)},{_value_text(e)},{_value_text(c)},{_value_text(a)},{_value_text(n)},{_value_text(r)}]"


# a row's text, remembered: an entry's log is written again with each of its failures
# (and a row is immutable), so each row is encoded about once, not once per write
_row_text = functools.lru_cache(maxsize=8192)(_fast_row_text)


def encode(log: Log) -> str:
    """The log's JSON text (what _encode(log) gives: rows joined with ",")."""
    return log if isinstance(log, str) else "[" + ",".join([_row_text(r) for r in log]) + "]"


def decode(log: Log) -> Rows:
    return log if isinstance(log, tuple) else tuple(tuple(r) for r in json.loads(log))


class AttemptChanges:
    """What one cursor write does to the attempt_logs rows of its cursor (`upserts`
    encodes the changed logs when the write applies them, off the event loop)."""

    __slots__ = ("_upserts", "deletes", "replace_all")

    def __init__(self, upserts: list[tuple[int, Log]] | None = None, deletes: list[int] | None = None,
                 replace_all: bool = False) -> None:
        self._upserts = upserts or []
        self.deletes = deletes or []
        self.replace_all = replace_all  # delete every row of the cursor first

    @property
    def upserts(self) -> list[tuple[int, str]]:
        return [(e, encode(log)) for e, log in self._upserts]


class AttemptLog:
    __slots__ = ("_all", "_changed", "durable", "rows")

    def __init__(self) -> None:
        self.rows: dict[int, Log] = {}
        self.durable = False  # a durable cursor's: changes are tracked for its writes
        self._changed: set[int] = set()
        self._all = False

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, entry_id: int) -> str | None:
        """The entry's log as JSON text (None: no log)."""
        log = self.rows.get(entry_id)
        return None if log is None else encode(log)

    def get_rows(self, entry_id: int) -> Rows:
        """The entry's rows, oldest first (() for no log)."""
        log = self.rows.get(entry_id)
        return () if log is None else decode(log)

    def set(self, entry_id: int, text: str) -> None:
        self.rows[entry_id] = text
        if self.durable:
            self._changed.add(entry_id)

    def append(self, entry_id: int, row: Row, limit: int) -> None:
        """Add one row to the entry's log, keeping its last `limit` rows."""
        rows = self.rows
        log = rows.get(entry_id)
        new = (row,) if log is None else (*decode(log), row)
        rows[entry_id] = new if len(new) <= limit else new[-limit:]
        if self.durable:
            self._changed.add(entry_id)

    def forget(self, entry_id: int) -> None:
        if self.rows.pop(entry_id, None) is not None and self.durable:
            self._changed.add(entry_id)

    def forget_through(self, entry_id: int) -> None:
        rows = self.rows
        if rows and min(rows) <= entry_id:
            gone = [k for k in rows if k <= entry_id]
            for k in gone:
                del rows[k]
            if self.durable:
                self._changed.update(gone)

    def clear(self) -> None:
        if self.rows:
            if self.durable:
                self._changed.update(self.rows)
            self.rows.clear()

    def copy(self) -> AttemptLog:
        c = AttemptLog()
        c.rows = dict(self.rows)
        c.durable = self.durable
        c._changed = set(self._changed)
        c._all = self._all
        return c

    # ---- persistence ----

    def take_changes(self) -> AttemptChanges | None:
        """The changes since the last call (None: nothing to write); they are then
        considered written (rewrite_all() after a write that failed)."""
        if self._all:
            self._all = False
            self._changed.clear()
            return AttemptChanges(upserts=sorted(self.rows.items()), replace_all=True)
        if not self._changed:
            return None
        rows = self.rows
        changes = AttemptChanges(
            upserts=[(e, rows[e]) for e in sorted(self._changed) if e in rows],
            deletes=[e for e in sorted(self._changed) if e not in rows],
        )
        self._changed.clear()
        return changes

    def has_changes(self) -> bool:
        return self._all or bool(self._changed)

    def drop_changes(self) -> None:
        """Forget the changes made so far: a write made elsewhere holds them."""
        self._changed.clear()
        self._all = False

    def rewrite_all(self) -> None:
        """A write did not commit: the next one writes every row again."""
        if self.durable:
            self._all = True

    def restore(self, rows: dict[int, str]) -> None:
        """Rows read back from attempt_logs at start-up (they override a record's "a")."""
        self.rows.update(rows)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> AttemptLog:
        """The `"a"` member of a record written before the attempt_logs table (if any):
        marked to be moved into the table by the next write."""
        log = cls()
        for e, rows in doc.get("a", []):
            log.rows[int(e)] = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
        log._all = bool(log.rows)
        return log
