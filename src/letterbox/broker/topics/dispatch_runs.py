# Plain runs: the part of a dispatch round that sends many entries to one consumer with
# one call per run instead of one per entry. A run is a prefix of the rows a
# round read (ledger.read_rows: the tail cache's committed rows as they are, no Entry)
# whose entries need no look of their own:
#   * none is acknowledged (ManagedCursor.first_acked_from), no backoff is pending in the
#     subscription (deliveries.due empty) and, where delivery times are honoured (Shared,
#     Key_Shared), none carries one (a publisher's hint None; UNREAD from disk is a look);
#   * each is sent while the consumer has permits left before it (as Dispatcher._dispatch),
#     and each books fewer messages than unblocked_room leaves (no unacked-limit flag can
#     change inside the run: PendingAcks.add_run needs no notification);
#   * their data together stay under the round's write size (a large entry goes alone).
# What is left of the rows goes through the per-entry path, which decides everything
# above entry by entry; the two give the same deliveries, counts, frames and bookkeeping.
# The tracker sees the run's deliveries in one call (RedeliveryTracker.on_send_run), the
# consumer books it in one call (Consumer.booked_run), before any frame is written.
from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING

from letterbox.broker.topics.hand_backs import HAND_BACK_TYPES, note_sent
from letterbox.failure.decide import DELAYS_HONOURED

if TYPE_CHECKING:
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.dispatched import DispatchedSubscription
    from letterbox.storage.cache import Row

_SIZE = itemgetter(4)
_NUM = itemgetter(3)
_DATA = itemgetter(5)


def plain_run_length(sub: DispatchedSubscription, consumer: Consumer, rows: list[Row], delivers: list[int | None],
                     room: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """(entries, messages) of the plain run at the head of `rows` for `consumer`, at most
    `limit` entries; (0, 0) when the first row needs the per-entry path."""
    n = min(len(rows), limit)
    cursor = sub.cursor
    if n <= 0 or cursor.deliveries.due:
        return 0, 0
    first = rows[0][1]
    n = min(n, cursor.first_acked_from(first) - first)
    if n > 0 and sub.sub_type in DELAYS_HONOURED and delivers.count(None) != len(delivers):
        for i in range(n):
            if delivers[i] is not None:
                n = i
                break
    if n <= 0:
        return 0, 0
    head = rows[:n] if n < len(rows) else rows
    if sum(map(_SIZE, head)) >= max_bytes:
        return 0, 0
    nums = list(map(_NUM, head))
    permits = consumer.permits
    total = sum(nums)
    if total == n:  # one message per entry: the bounds in one step
        k = max(0, min(n, permits, room - 1))
        return k, k
    k = total = 0
    for x in nums:
        if total >= permits or x >= room - total:
            break
        total += x
        k += 1
    return k, total


def send_plain_run(sub: DispatchedSubscription, consumer: Consumer, run: list[Row], messages: int) -> list[bytes]:
    """Record the delivery of the plain run `run` to `consumer` and return its MESSAGE
    frames (or one bytes object holding them all), which the caller writes, in order, before
    anything else goes to the consumer."""
    eids = [r[1] for r in run]
    sub.tracker.on_send_run(eids)
    cursor = sub.cursor
    enc = consumer.booked_run(run[0][0], eids, list(map(_NUM, run)), messages)
    if not cursor.deliveries.counts and not cursor.has_partial_batches():
        return [enc.frames(eids, list(map(_DATA, run)))]  # the run's frames as one bytes object
    frame, stored, ack_set = enc.frame, cursor.redelivery_count, cursor.batch_ack_set
    to_send, noted = sub.hand_backs.count_to_send, sub.sub_type in HAND_BACK_TYPES
    frames = []
    for r in run:
        eid = r[1]
        count = to_send(stored(eid), eid)
        if count and noted:
            note_sent(consumer, eid)
        frames.append(frame(eid, count, ack_set(eid), r[5]))
    return frames
