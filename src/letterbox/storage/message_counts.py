# MessageCounts: how many messages a ledger's entries hold, as prefix sums of num_messages
# (a batch entry holds many), so backlogs are O(1) without a Python object per entry.
#
# Invariants:
#   * _cum[i] = messages in entries _base .. _base + i, plus _before (the messages of the
#     entries before _base that were compacted away); 8 bytes per entry in an array('q');
#   * entries are added in entry-id order (one append per assigned id, appended-but-unconfirmed
#     ones included: callers clamp their queries to the last confirmed id);
#   * compaction (forget_before) only drops a prefix, and only when it is large, so trimming
#     stays amortised O(1) per entry.
from __future__ import annotations

from array import array
from bisect import bisect_left

_COMPACT_MIN = 4096


class MessageCounts:
    __slots__ = ("_base", "_before", "_cum")

    def __init__(self, first_entry_id: int, cum_messages: array[int] | None = None) -> None:
        self._cum: array[int] = cum_messages if cum_messages is not None else array("q")
        self._base = first_entry_id
        self._before = 0

    def add(self, num_messages: int) -> None:
        """The next entry id (in order) holds `num_messages` messages."""
        cum = self._cum
        cum.append((cum[-1] if cum else self._before) + num_messages)

    def pop(self) -> None:
        """Forget the last entry added (its id was given back)."""
        self._cum.pop()

    def truncate(self, next_entry_id: int) -> None:
        """Forget entries >= next_entry_id (ids given back after failed appends)."""
        del self._cum[max(next_entry_id - self._base, 0):]

    def upto(self, entry_id: int) -> int:
        """Messages in entries up to and including `entry_id` (since the ledger began)."""
        i = entry_id - self._base
        if i < 0:
            return self._before
        return self._cum[i]

    def between(self, first: int, last: int) -> int:
        """Messages in entries [first, last] (the caller clamps last to what exists)."""
        if last < first:
            return 0
        return self.upto(last) - self.upto(first - 1)

    def reaching(self, first: int, messages: int) -> int:
        """The id of the entry at which the entries from `first` on hold `messages` messages
        in all (the next id to be added when those added so far hold fewer)."""
        lo = max(first - self._base, 0)
        return self._base + bisect_left(self._cum, self.upto(first - 1) + messages, lo)

    def forget_before(self, first_entry_id: int) -> None:
        """Entries below `first_entry_id` are trimmed: drop their sums once there are many."""
        k = first_entry_id - self._base
        if k >= _COMPACT_MIN and k * 2 >= len(self._cum):
            self._before = self._cum[k - 1]
            del self._cum[:k]
            self._base = first_entry_id
