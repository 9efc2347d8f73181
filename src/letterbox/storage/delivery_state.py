# The delivery half of one subscription's persisted state (NATS's ConsumerState
# "pending / redelivered" part): for unacknowledged entries only,
#   counts        entry id -> times the entry's unacknowledged messages were
#                 redelivered (nack, ack timeout, consumer crash). A broker always
#                 redelivers an entry's unacked messages together, so they share it.
#   index_counts  entry id -> batch index -> the count a batch message had when it
#                 was acknowledged (batch-index acks), for messages acked after
#                 they were counted: later failures of a sibling never count
#                 against it. A message acked before any count has count 0.
#   times         entry id -> (first, last) delivery time, ms since the epoch
#   due           entry id -> when a pending backoff ends, ms since the epoch
#   attempts      entry id -> its failed deliveries (attempt_log.py), recorded on
#                 failure events only and forgotten with the entry's ack
# A durable cursor persists it as rows (delivery_rows.py: one per entry with a
# count, batch-index counts or a backoff; attempt_logs for the attempts), written
# with the cursor's record in ONE storage transaction: each write carries the rows
# of the entries that changed since the last one (`take_changes`), so a redelivery
# costs the rows it counted, not the whole state. A write that failed makes the
# next one rewrite every row (`rewrite_all`).
# Invariants: no key is an entry acknowledged as a whole (the cursor forgets an
# entry here when it acks it); index_counts[e][i] <= counts[e]; first <= last.
# Delivery times change on every send and do not make the state changed on their
# own: a row holds the times of its entry as of the row's last write, and every
# redelivery changes a count and writes the row, so a message's times are durable
# whenever its count is. Mutate through the methods, never the dicts (the changes
# are tracked there).
# Records of version 2 and older held this state inside the cursor record (from_doc
# reads them; the next write moves it into rows).
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .attempt_log import AttemptLog
from .delivery_rows import DeliveryChanges, Row, index_counts_of, index_counts_text


class DeliveryState:
    __slots__ = ("_all", "_changed", "attempts", "counts", "due", "durable", "index_counts", "times")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.index_counts: dict[int, dict[int, int]] = {}
        self.times: dict[int, tuple[int, int]] = {}
        self.due: dict[int, int] = {}
        self.attempts = AttemptLog()  # written as rows of attempt_logs (attempt_log.py)
        self.durable = False  # a durable cursor's: changes are tracked for its writes
        self._changed: set[int] = set()  # entries whose row must be written again
        self._all = False  # every row must be written again (a seek, a failed write, a load)

    # ---- counts ----

    def count(self, entry_id: int, batch_index: int | None = None, acked: bool = False) -> int:
        """The count of an entry, or of one of its batch messages (`acked`: that
        message is acknowledged, so the entry's later redeliveries were not its own)."""
        if batch_index is not None:
            per_index = self.index_counts.get(entry_id)
            if per_index is not None and batch_index in per_index:
                return per_index[batch_index]
            if acked:
                return 0
        return self.counts.get(entry_id, 0)

    def increment(self, entry_id: int) -> None:
        """Count one more delivery of the entry's unacknowledged messages."""
        counts = self.counts
        counts[entry_id] = counts.get(entry_id, 0) + 1
        if self.durable:
            self._changed.add(entry_id)

    def increment_all(self, entry_ids: Iterable[int]) -> None:
        """increment() for each entry."""
        counts = self.counts
        get = counts.get
        ids = list(entry_ids)
        for e in ids:
            counts[e] = get(e, 0) + 1
        if self.durable:
            self._changed.update(ids)

    def lower(self, entry_id: int, by: int) -> None:
        """Take back `by` counted deliveries of the entry (not below 0): failures that an
        outage caused (the circuit breaker, failure/circuit.py)."""
        n = self.counts.get(entry_id, 0)
        if not n or by <= 0:
            return
        self._track(entry_id)
        left = max(n - by, 0)
        if left:
            self.counts[entry_id] = left
        else:
            del self.counts[entry_id]
        per_index = self.index_counts.get(entry_id)
        if per_index:
            for i, c in per_index.items():
                per_index[i] = min(c, left)

    def batch_acked(self, entry_id: int, indexes: Iterable[int]) -> None:
        """Batch messages were just acknowledged: they keep the count they have now."""
        n = self.counts.get(entry_id, 0)
        if n:
            self.index_counts.setdefault(entry_id, {}).update(dict.fromkeys(indexes, n))
            self._track(entry_id)

    # ---- delivery times and backoff ----

    def delivered(self, entry_id: int, now_ms: int) -> None:
        times = self.times
        t = times.get(entry_id)
        times[entry_id] = (now_ms, now_ms) if t is None else (t[0], now_ms)
        # (not a change: the next count change, which follows every failed delivery, writes
        # the times with it)

    def delivered_run(self, entry_ids: list[int], now_ms: int) -> None:
        """delivered() for each of many entries sent at `now_ms` (first deliveries, the
        usual run, with one dict update)."""
        times = self.times
        if times.keys().isdisjoint(entry_ids):
            times.update(dict.fromkeys(entry_ids, (now_ms, now_ms)))
            return
        for e in entry_ids:
            t = times.get(e)
            times[e] = (now_ms, now_ms) if t is None else (t[0], now_ms)

    def set_due(self, entry_id: int, due_ms: int) -> None:
        self.due[entry_id] = due_ms
        self._track(entry_id)

    def pop_due(self, entry_id: int) -> int | None:
        at = self.due.pop(entry_id, None)
        if at is not None:
            self._track(entry_id)
        return at

    def clear_times(self) -> None:
        """A seek: no delivery time or pending backoff applies any more."""
        self.times.clear()
        self.due.clear()
        self._all = True

    def delivery_times(self, entry_id: int) -> tuple[int, int]:
        return self.times.get(entry_id, (0, 0))

    # ---- forgetting acknowledged entries ----

    def tracks_any(self) -> bool:
        """Whether any entry has a count, times, a backoff or attempts to forget."""
        return bool(self.counts or self.index_counts or self.times or self.due or self.attempts.rows)

    def forget(self, entry_id: int) -> None:
        if entry_id in self.counts or entry_id in self.due or entry_id in self.index_counts:
            self._track(entry_id)
            self.counts.pop(entry_id, None)
            self.due.pop(entry_id, None)
            self.index_counts.pop(entry_id, None)
        # (an acked message that never failed, the common case, only has its delivery time)
        self.times.pop(entry_id, None)
        if self.attempts.rows:
            self.attempts.forget(entry_id)

    def forget_through(self, mark_delete: int) -> None:
        self.attempts.forget_through(mark_delete)
        for d in (self.counts, self.index_counts, self.times, self.due):
            if d and min(d) <= mark_delete:
                gone = [k for k in d if k <= mark_delete]
                for k in gone:
                    del d[k]
                if self.durable and d is not self.times:
                    self._changed.update(gone)

    def copy(self) -> DeliveryState:
        c = DeliveryState()
        c.counts = dict(self.counts)
        c.index_counts = {e: dict(m) for e, m in self.index_counts.items()}
        c.times = dict(self.times)
        c.due = dict(self.due)
        c.attempts = self.attempts.copy()
        c.durable = self.durable
        c._changed = set(self._changed)
        c._all = self._all
        return c

    def clear(self) -> None:
        for d in (self.counts, self.index_counts, self.times, self.due):
            d.clear()
        self.attempts.clear()
        self._all = True

    def _track(self, entry_id: int) -> None:
        if self.durable:
            self._changed.add(entry_id)

    # ---- persistence ----

    def row(self, entry_id: int) -> Row | None:
        """The entry's row in `deliveries` (None: it has none)."""
        n = self.counts.get(entry_id)
        due = self.due.get(entry_id)
        per_index = self.index_counts.get(entry_id)
        if n is None and due is None and not per_index:
            return None
        t = self.times.get(entry_id)
        first, last = (None, None) if t is None else t
        return (entry_id, n or 0, first, last, due, index_counts_text(per_index))

    def take_changes(self) -> DeliveryChanges | None:
        """The row changes since the last call (None: nothing to write); they are then
        considered written (rewrite_all() after a write that failed)."""
        if self._all:
            self._all = False
            self._changed.clear()
            ids = sorted(set(self.counts).union(self.due, self.index_counts))
            return DeliveryChanges([r for e in ids if (r := self.row(e)) is not None], [], replace_all=True)
        if not self._changed:
            return None
        upserts: list[Row] = []
        deletes: list[int] = []
        row = self.row
        for e in sorted(self._changed):
            r = row(e)
            if r is None:
                deletes.append(e)
            else:
                upserts.append(r)
        self._changed.clear()
        return DeliveryChanges(upserts, deletes)

    def has_changes(self) -> bool:
        return self._all or bool(self._changed)

    def drop_changes(self) -> None:
        """Forget the changes made so far: a write that holds them was made elsewhere (a
        transaction's detached copy took them)."""
        self._changed.clear()
        self._all = False

    def rewrite_all(self) -> None:
        """A write did not commit: the next one writes every row again."""
        if self.durable:
            self._all = True

    @classmethod
    def from_rows(cls, rows: Iterable[Row]) -> DeliveryState:
        """The state read back from the `deliveries` rows of one cursor."""
        s = cls()
        for e, n, first, last, due, ic in rows:
            if n:
                s.counts[e] = n
            if first is not None and last is not None:
                s.times[e] = (first, last)
            if due is not None:
                s.due[e] = due
            if ic:
                s.index_counts[e] = index_counts_of(ic)
        return s

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> DeliveryState:
        """The state a record of version 2 (flat lists) or 1 ("rc": [[entry, count], ...])
        held, marked to be written as rows by the next write."""
        s = cls()
        s.counts = {int(e): int(n) for e, n in doc.get("rc", [])}
        c, t, d = doc.get("c", []), doc.get("t", []), doc.get("d", [])
        s.counts.update((int(c[i]), int(c[i + 1])) for i in range(0, len(c) - 1, 2))
        s.index_counts = {int(e): {int(i): int(n) for i, n in m} for e, m in doc.get("ic", [])}
        s.times = {int(t[i]): (int(t[i + 1]), int(t[i + 2])) for i in range(0, len(t) - 2, 3)}
        s.due = {int(d[i]): int(d[i + 1]) for i in range(0, len(d) - 1, 2)}
        s.attempts = AttemptLog.from_doc(doc)
        s._all = True
        return s
