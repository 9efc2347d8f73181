# Retention: how far a trim may delete a ledger's acknowledged entries, decided from the
# ledger's public reads only. Two rules, and an entry goes only when both let it go:
#   retention      Pulsar's retentionTimeInMinutes / retentionSizeInMB (namespace policy
#                  or broker default);
#   replay window  acknowledged entries stay while they are younger than replay_ms and
#                  among the newest replay_entries of the ledger, so a consumer can seek
#                  back and replay what it acknowledged moments ago -- what Pulsar gives
#                  by keeping the entries of a ledger until it rolls over (after
#                  managedLedgerMinLedgerRolloverTimeMinutes, at
#                  managedLedgerMaxEntriesPerLedger entries). Bounded by both limits.
# Invariants: never past `acked_upto` (an unacknowledged entry is never deleted), never
# below first - 1 (nothing to delete); entries go oldest first.
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .position import Position


class RetainedLedger(Protocol):
    """What the retention rules read of a ledger (ManagedLedger implements it)."""

    retention_ms: int  # 0 = delete once acked (without a size limit), -1 = keep forever
    retention_bytes: int  # -1 = no size limit
    replay_ms: int  # 0 = no replay window
    replay_entries: int  # 0 = no entry cap on the replay window
    clock_ms: Callable[[], int]

    @property
    def last_confirmed(self) -> Position: ...

    @property
    def first_position(self) -> Position: ...

    def size_bytes(self) -> int: ...

    def find_entry_by_publish_time(self, ts_ms: int) -> Position: ...

    def bytes_between(self, first: int, last: int) -> int: ...

    def first_entries_over(self, first: int, last: int, nbytes: int) -> int: ...


def retention_cut(led: RetainedLedger, acked_upto: int) -> int:
    """The last entry to delete: what retention lets go (`retained_cut`), short of the
    replay window (`replay_cut`)."""
    cut = retained_cut(led, acked_upto)
    window = replay_cut(led)
    return cut if window is None else min(cut, max(window, led.first_position.entry_id - 1))


def replay_cut(led: RetainedLedger) -> int | None:
    """The last entry the replay window lets go (None: no window): entries published
    replay_ms ago or earlier, and those older than the newest replay_entries."""
    if led.replay_ms <= 0:
        return None
    by_age = led.find_entry_by_publish_time(led.clock_ms() - led.replay_ms).entry_id - 1
    if led.replay_entries <= 0:
        return by_age
    return max(by_age, led.last_confirmed.entry_id - led.replay_entries)


def retained_cut(led: RetainedLedger, acked_upto: int) -> int:
    """The last entry retention lets go: acknowledged entries (up to `acked_upto`) go once
    they are older than retention_ms or while the ledger is over retention_bytes, oldest
    first; -1 on an axis means no limit there; retention_ms 0 without a size limit
    deletes on acknowledgement."""
    first = led.first_position.entry_id
    if acked_upto < first:
        return acked_upto
    if led.retention_ms == 0 and led.retention_bytes < 0:
        return acked_upto
    cut = first - 1
    if led.retention_ms > 0:
        keep_from = led.find_entry_by_publish_time(led.clock_ms() - led.retention_ms).entry_id
        cut = min(acked_upto, keep_from - 1)
    size = led.size_bytes()
    if led.retention_bytes >= 0 and size > led.retention_bytes and cut < acked_upto:
        over = size - led.retention_bytes - led.bytes_between(first, cut)
        if over > 0:
            cut = led.first_entries_over(cut + 1, acked_upto, over)
    return cut
