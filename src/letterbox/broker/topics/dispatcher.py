# The base of Pulsar's Dispatcher implementations: one per subscription, it
# owns the subscription's read loop -- the read position, the replay queue of
# entries to send again, scheduling and sending -- and its consumers. The
# subclasses (dispatchers.py, key_shared_dispatcher.py) only say which
# consumer an entry goes to and what to do when none can take it now.
# Invariants:
# - `read_position` is the next ledger entry never yet read for the
#   subscription; everything below it is acked, pending on a consumer, held by
#   the redelivery tracker (a delay or a backoff), in the replay queue, or held
#   by the ordered quarantine (key_quarantine.py: waiting behind its key, or
#   being parked).
# - The replay queue is kept in entry order and served before new entries, so
#   redelivered messages are never overtaken by newer ones of the same consumer
#   (Exclusive/Failover) or key (Key_Shared).
# - An entry is added to a consumer's pending map before its MESSAGE is written
#   (Consumer.booked_message), after the tracker has recorded the delivery. The
#   frames of consecutive entries for one consumer are written with one write, in
#   entry order, before the round ends or another consumer's frames are written.
# - For the sole consumer of a round, a run of entries that need no look of their own is
#   read as rows and booked, tracked and framed with one call each (dispatch_runs.py);
#   every other entry goes through the per-entry path below.
# This base class, with no consumer selection, is also the dispatcher of a
# subscription that has never had a consumer.
from __future__ import annotations

import asyncio
import bisect
from typing import TYPE_CHECKING, Any

from letterbox.broker.compaction.compacted_reads import (
    compacted_ack_set,
    compacted_entry,
    read_compacted,
)
from letterbox.broker.policies import dispatch_rate
from letterbox.broker.policies.unacked_limits import unblocked_room
from letterbox.broker.topics.dispatch_runs import plain_run_length, send_plain_run
from letterbox.storage.cache import entry_of

if TYPE_CHECKING:
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.subscription import Subscription
    from letterbox.storage.entry import Entry

READ_BATCH = 100
MAX_ENTRIES_PER_ROUND = 2000
MAX_EXAMINED_PER_ROUND = 20_000
MAX_REPLAY_PARKED = 10_000
# a run of MESSAGE frames for one consumer is written once it holds this many bytes
RUN_WRITE_BYTES = 1024 * 1024


class Dispatcher:
    # True: an entry no consumer can take now is parked and reading goes on
    # (another key may still be deliverable); False: reading stops there
    defers = False
    # Shared / Key_Shared refuse cumulative acknowledgement
    cumulative_ack = True

    def __init__(self, sub: Subscription | None, carry: Dispatcher | None = None) -> None:
        """`sub` None: a non-persistent subscription (selection only, no read loop).
        `carry`: the dispatcher this one replaces (its read position and replay queue
        are taken over)."""
        self.sub = sub
        self.consumers: list[Consumer] = []
        self.read_position: int
        if carry is not None:
            self.read_position = carry.read_position
            self._replay: list[int] = carry._replay
        else:
            self.read_position = sub.cursor.mark_delete.entry_id + 1 if sub is not None else 0
            self._replay = []
        self._scheduled = False

    # --- consumers (subclasses refine) -------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.consumers_changed()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.consumers_changed()

    def consumers_changed(self) -> None:
        """After a consumer came or went (Failover picks its active consumer here)."""

    def any_available(self) -> bool:
        return any(c.available for c in self.consumers)

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        return None

    def sole_consumer(self) -> Consumer | None:
        """The consumer `select` returns for any entry while that consumer is available
        (None: selection depends on the entry or rotates)."""
        return None

    def on_acked(self) -> None:
        """After acknowledgements (Key_Shared lifts its fences here)."""

    def active_name(self) -> str | None:
        return None

    # --- replay queue ------------------------------------------------------
    def park(self, entry_ids: list[int]) -> None:
        """Queue entries to be sent again, in entry order, before new ones."""
        if len(entry_ids) > 64:  # many at once (a big nack round): one merge, not n inserts
            self._replay = sorted(set(self._replay).union(entry_ids))
            return
        for eid in entry_ids:
            i = bisect.bisect_left(self._replay, eid)
            if i == len(self._replay) or self._replay[i] != eid:
                self._replay.insert(i, eid)

    def unpark(self, entry_id: int) -> None:
        i = bisect.bisect_left(self._replay, entry_id)
        if i < len(self._replay) and self._replay[i] == entry_id:
            del self._replay[i]

    def unpark_through(self, upto: int) -> None:
        if self._replay and self._replay[0] <= upto:
            self._replay = [e for e in self._replay if e > upto]

    def reset(self, next_entry_id: int) -> None:
        self.read_position = next_entry_id
        self._replay.clear()

    # --- dispatch ------------------------------------------------------------
    def schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._scheduled = False
        sub = self.sub
        if sub is None or sub.dispatcher is not self or not self.consumers or not self.any_available():
            return
        sent = self._dispatch_replay(sub)
        ledger = sub.topic.ledger
        cursor = sub.cursor
        tracker = sub.tracker
        last = ledger.last_confirmed.entry_id
        plan = self._new_round()
        examined = 0
        quarantine = sub.quarantine if sub.quarantine.active else None
        limits = sub.topic.limits
        throttled = limits.subscription_dispatch_rate is not None or limits.topic_dispatch_rate is not None
        # the MESSAGE frames of consecutive entries for one consumer are written together
        # (one write per run, or per RUN_WRITE_BYTES), after the consumer's bookkeeping
        run: Consumer | None = None
        frames: list[bytes] = []
        run_bytes = 0
        # a consumer every selection of this round would pick while it is available (checked
        # before each entry: the loop condition and after each send): no selection per entry,
        # and no unacked-limit look while its bookings stay below the room left
        sole = self.sole_consumer()
        room = unblocked_room(sole) if sole is not None else 0
        runs = sole is not None and quarantine is None and not throttled and not sub.read_compacted
        try:
            while (
                self.read_position <= last
                and sent < MAX_ENTRIES_PER_ROUND
                and examined < MAX_EXAMINED_PER_ROUND
                and self.any_available()
            ):
                if runs:  # plain runs for the sole consumer, the rest entry by entry
                    assert sole is not None
                    rows, delivers = ledger.read_rows(self.read_position, READ_BATCH)
                    if not rows:
                        break
                    examined += len(rows)
                    k, messages = plain_run_length(sub, sole, rows, delivers, room, MAX_ENTRIES_PER_ROUND - sent,
                                                   RUN_WRITE_BYTES)
                    if k:
                        run = sole
                        new = send_plain_run(sub, sole, rows[:k] if k < len(rows) else rows, messages)
                        self.read_position = rows[k - 1][1] + 1
                        room -= messages
                        sent += k
                        frames += new
                        run_bytes += sum(map(len, new))
                        if run_bytes >= RUN_WRITE_BYTES:
                            sole.cnx.write(b"".join(frames))
                            frames = []
                            run_bytes = 0
                        if k == len(rows) or not sole.available:
                            continue
                        rows, delivers = rows[k:], delivers[k:]
                    entries = [entry_of(r, d) for r, d in zip(rows, delivers, strict=True)]
                else:
                    compacted = read_compacted(sub, self.read_position, READ_BATCH) if sub.read_compacted else None
                    if compacted is not None:
                        entries = compacted
                    else:
                        if self.read_position < ledger.first_position.entry_id:
                            self.read_position = ledger.first_position.entry_id
                        entries = ledger.read_entries(self.read_position, READ_BATCH)
                    if not entries:
                        break
                    examined += len(entries)
                for entry in entries:
                    eid = entry.position.entry_id
                    if cursor.is_acked(eid) or tracker.hold(entry):
                        self.read_position = eid + 1
                        continue
                    if quarantine is not None and not quarantine.admit(entry):  # waits or is parked
                        self.read_position = eid + 1
                        if quarantine.full:
                            return
                        continue
                    if throttled and not dispatch_rate.admit(sub, entry, self.schedule):
                        return  # the dispatch rate's window is full: woken when it turns
                    target = sole if sole is not None else self._target(entry, plan)
                    if target is None:
                        if not self.defers:
                            return
                        self.read_position = eid + 1
                        self._defer(entry, plan)
                        if len(self._replay) >= MAX_REPLAY_PARKED:
                            return
                        continue
                    self.read_position = eid + 1
                    if target is not run:
                        if run is not None and frames:
                            run.cnx.write(b"".join(frames))
                            frames = []
                            run_bytes = 0
                        run = target
                    n = entry.num_messages
                    frame = self._frame(sub, target, entry, quiet=n < room)
                    room -= n
                    frames.append(frame)
                    run_bytes += len(frame)
                    if run_bytes >= RUN_WRITE_BYTES:  # written now: a full socket stops the round
                        target.cnx.write(b"".join(frames))
                        frames = []
                        run_bytes = 0
                    sent += 1
                    if not (target.available if sole is not None else self.any_available()):
                        break
        finally:
            if run is not None and frames:
                run.cnx.write(b"".join(frames))
        if sent >= MAX_ENTRIES_PER_ROUND or examined >= MAX_EXAMINED_PER_ROUND:
            self.schedule()  # yield to other connections, then go on

    def _dispatch_replay(self, sub: Subscription) -> int:
        if not self._replay:
            return 0
        sent = 0
        keep: list[int] = []
        ledger = sub.topic.ledger
        blocked: set[int] = set()
        quarantine = sub.quarantine if sub.quarantine.active else None
        for idx, eid in enumerate(self._replay):
            if not self.any_available() or sent >= MAX_ENTRIES_PER_ROUND:
                keep.extend(self._replay[idx:])
                break
            if sub.cursor.is_acked(eid):
                continue
            if self._blocked_unread(eid, blocked):
                keep.append(eid)
                continue
            entry = (sub.read_compacted and compacted_entry(sub, eid)) or ledger.read_entry(eid)
            if entry is None or (quarantine is not None and not quarantine.admit(entry)):
                continue
            target = self._replay_target(entry, blocked)
            if target is None:
                if self.defers:
                    keep.append(eid)
                    continue
                keep.extend(self._replay[idx:])
                break
            self._send(sub, target, entry)
            sent += 1
        self._replay = keep
        return sent

    def _send(self, sub: Subscription, target: Consumer, entry: Entry) -> None:
        target.cnx.write(self._frame(sub, target, entry))

    def _frame(self, sub: Subscription, target: Consumer, entry: Entry, quiet: bool = False) -> bytes:
        """Record the delivery of `entry` to `target` and return its MESSAGE frame, which
        the caller writes before anything else goes to the target's connection."""
        eid = entry.position.entry_id
        sub.tracker.on_send(eid)
        ack_set = sub.cursor.batch_ack_set(eid)
        if sub.read_compacted:  # messages the compacted view left out count as acked
            ack_set = compacted_ack_set(sub, entry, ack_set)
        return target.booked_message(entry, sub.cursor.redelivery_count(eid), ack_set, quiet)

    # --- selection hooks (Key_Shared overrides them) --------------------------
    def _new_round(self) -> Any:
        """Per-round state of the read loop, handed to _target and _defer."""
        return None

    def _target(self, entry: Entry, plan: Any) -> Consumer | None:
        return self.select(entry, False)

    def _defer(self, entry: Entry, plan: Any) -> None:
        self.park([entry.position.entry_id])

    def _blocked_unread(self, entry_id: int, blocked: set[int]) -> bool:
        """A replay entry that cannot go now, known without reading it."""
        return False

    def _replay_target(self, entry: Entry, blocked: set[int]) -> Consumer | None:
        return self.select(entry, True)
