# Finding the entries of a subscription that are due to expire (published at or
# before a cutoff) WITHOUT assuming that entry order is publish-time order: it is
# not when producers run on clocks that differ, when a client holds a batch while
# another producer sends, or when messages are moved in stamped with the broker's
# clock. Each entry is judged by its own publish time.
# So that a namespace TTL check (every second, over every subscription) does not
# read every entry of a large backlog each time, the smallest and largest publish
# times of each full block of BLOCK entries are remembered per ledger: a block whose
# smallest is after the cutoff holds nothing due and is skipped whole; one whose
# largest is at or before it is due whole (only acknowledgements are looked at).
# Invariants: stored entries never change, so a full block's range never goes stale;
# trimming only drops entries, so a remembered range still bounds what is left. The
# partial last block is always read entry by entry. Nothing here writes.
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedSubscription
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.store import Store

BLOCK = 1024
SCAN_ENTRIES = 16 * BLOCK  # entries looked at per call before the caller gets control back

_block_ranges: weakref.WeakKeyDictionary[ManagedLedger, dict[int, tuple[int, int] | None]] = (
    weakref.WeakKeyDictionary())


def _block_range(store: Store, ledger: ManagedLedger, block: int) -> tuple[int, int] | None:
    """(smallest, largest) publish time of the full block `block` (None: nothing stored)."""
    ranges = _block_ranges.setdefault(ledger, {})
    if block not in ranges:
        first = block * BLOCK
        ranges[block] = store.publish_time_range(ledger.ledger_id, first, first + BLOCK - 1)
    return ranges[block]


def due_entries(
    sub: TrackedSubscription, cutoff_ms: int, start: int, last: int, limit: int
) -> tuple[list[int], int]:
    """Unacknowledged entries from `start` through `last` published at or before
    `cutoff_ms`, oldest first, at most `limit`; and the entry id to go on from.
    Returns after looking at about SCAN_ENTRIES entries even if it found fewer."""
    ledger = sub.topic.ledger
    store = sub.topic.service.store
    cursor = sub.cursor
    confirmed = ledger.last_confirmed.entry_id
    out: list[int] = []
    eid = max(start, ledger.first_position.entry_id)
    looked = 0
    while eid <= last and len(out) < limit and looked < SCAN_ENTRIES:
        block_end = eid - eid % BLOCK + BLOCK - 1
        whole = False
        if block_end <= confirmed:  # a full block: its range may settle it whole
            bounds = _block_range(store, ledger, eid // BLOCK)
            if bounds is None or bounds[0] > cutoff_ms:
                eid = block_end + 1
                looked += 1
                continue
            whole = bounds[1] <= cutoff_ms
        end = min(block_end, last)
        while eid <= end and len(out) < limit:
            if not cursor.is_acked(eid):
                if whole:
                    out.append(eid)
                else:
                    published = ledger.publish_time(eid)
                    if published is not None and published <= cutoff_ms:
                        out.append(eid)
            eid += 1
            looked += 1
    return out, eid
