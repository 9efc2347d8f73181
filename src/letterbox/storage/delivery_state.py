# The delivery half of one subscription's persisted state record (NATS's
# ConsumerState "pending / redelivered" part): for unacknowledged entries only,
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
#                 failure events only and forgotten with the entry's ack; written
#                 with the record, in the same transaction, as rows of its own
# It lives inside the cursor record (managed_cursor.py), so it is written with
# mark-delete and the ack sets in ONE storage transaction.
# Invariants: no key is an entry acknowledged as a whole (the cursor forgets an
# entry here when it acks it); index_counts[e][i] <= counts[e]; first <= last.
# Delivery times change on every send and do not make the record dirty on their
# own. The record holds the times of messages that have a count or a pending
# backoff only (the failing ones: a few, where every message in flight may
# have times), written with the record's next write; every redelivery changes
# a count and writes it, so a message's times are durable whenever its count is.
# The serialized part is cached (`fragment`) and rebuilt only after it changed,
# so the many record writes that only move acknowledgements do not serialize
# the failing messages again: mutate through the methods, never the dicts.
# A rebuild re-encodes only the buckets of 512 entry ids whose counts or
# backoffs changed (a nack round touches a few): the other buckets' text is
# reused, their delivery times as of their last count change (the guarantee
# above: a message's times are written with its count). The buckets' texts are
# joined per group of 8 buckets (4,096 ids), a group again only when one of its
# buckets changed, so a record write joins a few strings per 4,096 ids.
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .attempt_log import AttemptLog

_SHIFT = 9  # buckets of 512 entry ids
_GROUP = 3  # groups of 8 buckets


class DeliveryState:
    __slots__ = ("_counted", "_fragment", "_groups", "_parts", "_stale", "attempts", "counts", "due", "index_counts",
                 "times")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.index_counts: dict[int, dict[int, int]] = {}
        self.times: dict[int, tuple[int, int]] = {}
        self.due: dict[int, int] = {}
        self.attempts = AttemptLog()  # written on its own (attempt_log.py), not in the record
        self._fragment: str | None = None  # the serialized record part, while unchanged
        self._counted: dict[int, set[int]] = {}  # bucket -> its entries with a count
        self._parts: dict[int, tuple[str, str]] = {}  # bucket -> its "c" and "t" text
        self._groups: dict[int, tuple[str, str]] = {}  # group -> its buckets' "c" and "t" texts joined
        self._stale: set[int] = set()  # buckets whose text must be made again

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
        self._fragment = None
        n = self.counts.get(entry_id, 0)
        self.counts[entry_id] = n + 1
        b = entry_id >> _SHIFT
        self._stale.add(b)
        if not n:
            self._counted.setdefault(b, set()).add(entry_id)

    def lower(self, entry_id: int, by: int) -> None:
        """Take back `by` counted deliveries of the entry (not below 0): failures that an
        outage caused (the circuit breaker, failure/circuit.py)."""
        n = self.counts.get(entry_id, 0)
        if not n or by <= 0:
            return
        self._fragment = None
        b = entry_id >> _SHIFT
        self._stale.add(b)
        left = max(n - by, 0)
        if left:
            self.counts[entry_id] = left
        else:
            del self.counts[entry_id]
            counted = self._counted.get(b)
            if counted is not None:
                counted.discard(entry_id)
        per_index = self.index_counts.get(entry_id)
        if per_index:
            for i, c in per_index.items():
                per_index[i] = min(c, left)

    def batch_acked(self, entry_id: int, indexes: Iterable[int]) -> None:
        """Batch messages were just acknowledged: they keep the count they have now."""
        n = self.counts.get(entry_id, 0)
        if n:
            self.index_counts.setdefault(entry_id, {}).update(dict.fromkeys(indexes, n))
            self._fragment = None

    # ---- delivery times and backoff ----

    def delivered(self, entry_id: int, now_ms: int) -> None:
        times = self.times
        t = times.get(entry_id)
        times[entry_id] = (now_ms, now_ms) if t is None else (t[0], now_ms)
        # (the record is not marked changed: the next count change, which follows every
        # failed delivery, writes the times; the record holds those of its last change)

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
        self._fragment = None
        self._stale.add(entry_id >> _SHIFT)

    def pop_due(self, entry_id: int) -> int | None:
        at = self.due.pop(entry_id, None)
        if at is not None:
            self._fragment = None
            self._stale.add(entry_id >> _SHIFT)
        return at

    def clear_times(self) -> None:
        """A seek: no delivery time or pending backoff applies any more."""
        self.times.clear()
        self.due.clear()
        self._all_stale()

    def delivery_times(self, entry_id: int) -> tuple[int, int]:
        return self.times.get(entry_id, (0, 0))

    # ---- forgetting acknowledged entries ----

    def tracks_any(self) -> bool:
        """Whether any entry has a count, times, a backoff or attempts to forget."""
        return bool(self.counts or self.index_counts or self.times or self.due or self.attempts.rows)

    def forget(self, entry_id: int) -> None:
        if entry_id in self.counts or entry_id in self.due:
            self._fragment = None
            b = entry_id >> _SHIFT
            self._stale.add(b)
            counted = self._counted.get(b)
            if counted is not None:
                counted.discard(entry_id)
            self.counts.pop(entry_id, None)
            self.due.pop(entry_id, None)
        # (an acked message that never failed, the common case, only has its delivery time)
        self.times.pop(entry_id, None)
        if self.index_counts:
            self.index_counts.pop(entry_id, None)
        if self.attempts.rows:
            self.attempts.forget(entry_id)

    def forget_through(self, mark_delete: int) -> None:
        self.attempts.forget_through(mark_delete)
        for d in (self.counts, self.index_counts, self.times, self.due):
            if d and min(d) <= mark_delete:
                for k in [k for k in d if k <= mark_delete]:
                    del d[k]
                self._all_stale()

    def copy(self) -> DeliveryState:
        c = DeliveryState()
        c.counts = dict(self.counts)
        c.index_counts = {e: dict(m) for e, m in self.index_counts.items()}
        c.times = dict(self.times)
        c.due = dict(self.due)
        c.attempts = self.attempts.copy()
        c._fragment = self._fragment
        c._counted = {b: set(ids) for b, ids in self._counted.items()}
        c._parts = dict(self._parts)
        c._groups = dict(self._groups)
        c._stale = set(self._stale)
        return c

    def clear(self) -> None:
        for d in (self.counts, self.index_counts, self.times, self.due):
            d.clear()
        self.attempts.clear()
        self._all_stale()

    def _all_stale(self) -> None:
        """Everything is encoded again at the next fragment() (a seek, a jump, a load)."""
        self._fragment = None
        self._counted = {}
        for e in self.counts:
            self._counted.setdefault(e >> _SHIFT, set()).add(e)
        self._parts.clear()
        self._groups.clear()
        self._stale = set(self._counted).union(e >> _SHIFT for e in self.due)

    # ---- record ----

    def fragment(self) -> str:
        """This state as JSON object members (`"c":[...],...`), to splice into the record:
        the text json.dumps gives for to_doc's members, the unchanged buckets reused."""
        if self._fragment is None:
            self._encode_stale()
            groups = [p for _g, p in sorted(self._groups.items())]
            out = '"c":[' + ",".join([c for c, _t in groups if c]) + "]"
            if self.index_counts:
                ic = [[e, sorted(m.items())] for e, m in sorted(self.index_counts.items())]
                out += ',"ic":' + json.dumps(ic, separators=(",", ":"))
            if self.times:
                t = ",".join([t for _c, t in groups if t])
                if t:
                    out += ',"t":[' + t + "]"
            due = self.due
            if due:
                out += ',"d":[' + ",".join([f"{e},{due[e]}" for e in sorted(due)]) + "]"
            self._fragment = out
        return self._fragment

    def _encode_stale(self) -> None:
        counts, times, due, parts = self.counts, self.times, self.due, self._parts
        for b in self._stale:
            counted = self._counted.get(b)
            ids = sorted(counted) if counted else []
            c = ",".join([f"{e},{counts[e]}" for e in ids])
            if due:
                ids = sorted(set(ids).union(e for e in due if e >> _SHIFT == b))
            t = ",".join([f"{e},{x[0]},{x[1]}" for e in ids if (x := times.get(e)) is not None])
            if c or t:
                parts[b] = (c, t)
            else:
                parts.pop(b, None)
                if counted is not None and not counted:
                    del self._counted[b]
        for g in {b >> _GROUP for b in self._stale}:
            inner = [p for b in range(g << _GROUP, (g + 1) << _GROUP) if (p := parts.get(b)) is not None]
            if inner:
                self._groups[g] = (",".join([c for c, _t in inner if c]), ",".join([t for _c, t in inner if t]))
            else:
                self._groups.pop(g, None)
        self._stale.clear()

    def to_doc(self, doc: dict[str, Any]) -> None:
        """Flat integer lists (e, n, e, n, ...): cheap to write for thousands of entries."""
        counts, times, due = self.counts, self.times, self.due
        doc["c"] = [x for e in sorted(counts) for x in (e, counts[e])]
        if self.index_counts:
            doc["ic"] = [[e, sorted(m.items())] for e, m in sorted(self.index_counts.items())]
        if times:
            flat: list[int] = []
            for e in sorted(set(counts).union(due) if due else counts):
                t = times.get(e)
                if t is not None:
                    flat += (e, t[0], t[1])
            if flat:
                doc["t"] = flat
        if due:
            doc["d"] = [x for e in sorted(due) for x in (e, due[e])]

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> DeliveryState:
        """Reads version 2 (flat lists) and version 1 ("rc": [[entry, count], ...])."""
        s = cls()
        s.counts = {int(e): int(n) for e, n in doc.get("rc", [])}
        c, t, d = doc.get("c", []), doc.get("t", []), doc.get("d", [])
        s.counts.update((int(c[i]), int(c[i + 1])) for i in range(0, len(c) - 1, 2))
        s.index_counts = {int(e): {int(i): int(n) for i, n in m} for e, m in doc.get("ic", [])}
        s.times = {int(t[i]): (int(t[i + 1]), int(t[i + 2])) for i in range(0, len(t) - 2, 3)}
        s.due = {int(d[i]): int(d[i + 1]) for i in range(0, len(d) - 1, 2)}
        s.attempts = AttemptLog.from_doc(doc)
        s._all_stale()
        return s
