# The delivery half of one subscription's persisted state record (NATS's
# ConsumerState "pending / redelivered" part): for unacknowledged entries only,
#   counts        entry id -> times the entry was redelivered (nack, ack timeout,
#                 consumer crash); for a batch, the highest count of its messages
#   index_counts  entry id -> batch index -> count, kept only for a batch whose
#                 messages were counted apart (some were acked at a redelivery)
#   times         entry id -> (first, last) delivery time, ms since the epoch
#   due           entry id -> when a pending backoff ends, ms since the epoch
# It lives inside the cursor record (managed_cursor.py), so it is written with
# mark-delete and the ack sets in ONE storage transaction.
# Invariants: no key is an entry acknowledged as a whole (the cursor forgets an
# entry here when it acks it); when index_counts[e] exists, counts[e] is the
# highest value of the indexes counted there; first <= last in times.
# Delivery times change on every send and do not make the record dirty on their
# own. The record holds the times of messages that have a count or a pending
# backoff only (the failing ones: a few, where every message in flight may
# have times), written with the record's next write; every redelivery changes
# a count and writes it, so a message's times are durable whenever its count is.
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class DeliveryState:
    __slots__ = ("counts", "due", "index_counts", "times")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.index_counts: dict[int, dict[int, int]] = {}
        self.times: dict[int, tuple[int, int]] = {}
        self.due: dict[int, int] = {}

    # ---- counts ----

    def count(self, entry_id: int, batch_index: int | None = None) -> int:
        if batch_index is not None:
            per_index = self.index_counts.get(entry_id)
            if per_index is not None and batch_index in per_index:
                return per_index[batch_index]
        return self.counts.get(entry_id, 0)

    def increment(self, entry_id: int, indexes: Iterable[int] | None = None, batch_size: int = 0) -> None:
        """Count one more delivery of an entry: of all its messages (`indexes` None),
        or only of the messages `indexes` of a batch of `batch_size` (the unacked ones)."""
        per_index = self.index_counts.get(entry_id)
        if indexes is None and per_index is None:
            self.counts[entry_id] = self.counts.get(entry_id, 0) + 1
            return
        if per_index is None:
            base = self.counts.get(entry_id, 0)
            per_index = self.index_counts[entry_id] = dict.fromkeys(range(batch_size), base)
        for i in (list(per_index) if indexes is None else indexes):
            per_index[i] = per_index.get(i, 0) + 1
        self.counts[entry_id] = max(per_index.values())

    # ---- delivery times and backoff ----

    def delivered(self, entry_id: int, now_ms: int) -> None:
        first = self.times.get(entry_id, (now_ms, now_ms))[0]
        self.times[entry_id] = (first, now_ms)

    def delivery_times(self, entry_id: int) -> tuple[int, int]:
        return self.times.get(entry_id, (0, 0))

    # ---- forgetting acknowledged entries ----

    def forget(self, entry_id: int) -> None:
        self.counts.pop(entry_id, None)
        self.index_counts.pop(entry_id, None)
        self.times.pop(entry_id, None)
        self.due.pop(entry_id, None)

    def forget_through(self, mark_delete: int) -> None:
        for d in (self.counts, self.index_counts, self.times, self.due):
            if d and min(d) <= mark_delete:
                for k in [k for k in d if k <= mark_delete]:
                    del d[k]

    def copy(self) -> DeliveryState:
        c = DeliveryState()
        c.counts = dict(self.counts)
        c.index_counts = {e: dict(m) for e, m in self.index_counts.items()}
        c.times = dict(self.times)
        c.due = dict(self.due)
        return c

    def clear(self) -> None:
        for d in (self.counts, self.index_counts, self.times, self.due):
            d.clear()

    # ---- record ----

    def to_doc(self, doc: dict[str, Any]) -> None:
        doc["rc"] = [[e, n] for e, n in sorted(self.counts.items())]
        if self.index_counts:
            doc["ic"] = [[e, sorted(m.items())] for e, m in sorted(self.index_counts.items())]
        if self.times:
            times = self.times
            failing = sorted(e for e in set(self.counts).union(self.due) if e in times)
            if failing:
                doc["dt"] = [[e, *times[e]] for e in failing]
        if self.due:
            doc["due"] = [[e, at] for e, at in sorted(self.due.items())]

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> DeliveryState:
        s = cls()
        s.counts = {int(e): int(n) for e, n in doc.get("rc", [])}
        s.index_counts = {int(e): {int(i): int(n) for i, n in m} for e, m in doc.get("ic", [])}
        s.times = {int(e): (int(f), int(last)) for e, f, last in doc.get("dt", [])}
        s.due = {int(e): int(at) for e, at in doc.get("due", [])}
        return s
