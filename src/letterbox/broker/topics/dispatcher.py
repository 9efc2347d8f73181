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
# - An entry is added to a consumer's pending map before its MESSAGE is sent
#   (Consumer.booked_message), after the tracker has recorded the delivery. The frames of
#   consecutive entries for one consumer go in one call of the connection's send, in entry
#   order, before the round ends or another consumer's frames are sent.
# - For the sole consumer of a round, a run of entries that need no look of their own is
#   read as rows and booked, tracked and framed with one call each (dispatch_runs.py);
#   every other entry goes through the per-entry path below.
# This base class, with no consumer selection, is also the dispatcher of a subscription
# that has never had a consumer.
from __future__ import annotations

import asyncio
import bisect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.broker.compaction.compacted_reads import (
    compacted_ack_set,
    compacted_entry,
    read_compacted,
)
from letterbox.broker.policies import dispatch_rate
from letterbox.broker.policies.unacked_limits import unblocked_room
from letterbox.broker.topics.dispatch_runs import plain_run_length, send_plain_run
from letterbox.broker.topics.hand_backs import HAND_BACK_TYPES, note_sent
from letterbox.storage import StorageError
from letterbox.storage.cache import entry_of

if TYPE_CHECKING:
    from letterbox.broker.redelivery.key_quarantine import KeyQuarantine
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.dispatched import DispatchedSubscription
    from letterbox.storage.entry import Entry

log = logging.getLogger(__name__)
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

    def __init__(self, sub: DispatchedSubscription | None, carry: Dispatcher | None = None) -> None:
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
        self._limit = MAX_ENTRIES_PER_ROUND  # 1 while the circuit breaker lets a probe through
        self._refused: set[str] = set()  # the damaged-entry refusals already logged

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
        """One round: the replay queue, then new entries until the end, a limit or no taker."""
        self._scheduled = False
        sub = self.sub
        if sub is None or sub.dispatcher is not self or not self.consumers or not self.any_available():
            return
        allowance = sub.tracker.circuit.allowance()  # None: closed, 0: open, 1: the probe
        if allowance == 0:
            return
        self._limit = MAX_ENTRIES_PER_ROUND if allowance is None else allowance
        try:
            r = self._begin_round(sub, self._dispatch_replay(sub))
            try:
                finished = self._read_new(r)
            finally:
                r.flush()
        except StorageError as exc:  # a damaged entry is never served: the subscription stops there
            if str(exc) not in self._refused:  # said once, one line
                self._refused.add(str(exc))
                log.warning("a subscription of %s stops before a damaged entry: %s", sub.topic.name, exc)
            return
        if finished and allowance is None and (r.sent >= MAX_ENTRIES_PER_ROUND
                                               or r.examined >= MAX_EXAMINED_PER_ROUND):
            self.schedule()  # yield to other connections, then go on

    def _begin_round(self, sub: DispatchedSubscription, sent: int) -> _Round:
        plan = self._new_round()
        quarantine = sub.quarantine if sub.quarantine.active else None
        limits = sub.topic.limits
        throttled = limits.subscription_dispatch_rate is not None or limits.topic_dispatch_rate is not None
        sole = self.sole_consumer()
        room = unblocked_room(sole) if sole is not None else 0
        runs = sole is not None and quarantine is None and not throttled and not sub.read_compacted \
            and self._limit == MAX_ENTRIES_PER_ROUND
        return _Round(sub, sent, plan, quarantine, throttled, sole, room, runs)

    def _read_new(self, r: _Round) -> bool:
        """Read and send new entries; False: the round stopped where it must not be resumed at
        once (a full quarantine or replay queue, a spent dispatch rate, nobody to take one)."""
        last = r.sub.topic.ledger.last_confirmed.entry_id
        while (
            self.read_position <= last
            and r.sent < self._limit
            and r.examined < MAX_EXAMINED_PER_ROUND
            and self.any_available()
        ):
            entries = self._plain_runs(r) if r.runs else self._read_entries(r)
            if entries is None:
                break
            if not self._offer(r, entries):
                return False
        return True

    def _plain_runs(self, r: _Round) -> list[Entry] | None:
        """Send plain runs to the sole consumer; the entries left to send one by one, None: end."""
        sub, sole = r.sub, r.sole
        assert sole is not None
        ledger = sub.topic.ledger
        rows, delivers = ledger.read_rows(
            self.read_position, ledger.entries_holding(self.read_position, sole.permits, READ_BATCH))
        if not rows:
            return None
        r.examined += len(rows)
        k, messages = plain_run_length(sub, sole, rows, delivers, r.room, MAX_ENTRIES_PER_ROUND - r.sent,
                                       RUN_WRITE_BYTES)
        if k:
            r.run = sole
            new = send_plain_run(sub, sole, rows[:k] if k < len(rows) else rows, messages)
            self.read_position = rows[k - 1][1] + 1
            r.room -= messages
            r.sent += k
            r.frames += new
            r.run_frames += k
            r.run_bytes += sum(map(len, new))
            if r.run_bytes >= RUN_WRITE_BYTES:
                r.flush()
            if k == len(rows) or not sole.available:
                return []
            rows, delivers = rows[k:], delivers[k:]
        return [entry_of(row, d) for row, d in zip(rows, delivers, strict=True)]

    def _read_entries(self, r: _Round) -> list[Entry] | None:
        """The next entries (the compacted view's for read_compacted), None at the end."""
        sub = r.sub
        ledger = sub.topic.ledger
        compacted = read_compacted(sub, self.read_position, READ_BATCH) if sub.read_compacted else None
        if compacted is not None:
            entries = compacted
        else:
            if self.read_position < ledger.first_position.entry_id:
                self.read_position = ledger.first_position.entry_id
            takers = sum(c.permits for c in self.consumers if c.available)
            entries = ledger.read_entries(self.read_position,
                                          ledger.entries_holding(self.read_position, takers, READ_BATCH))
        if not entries:
            return None
        r.examined += len(entries)
        return entries

    def _offer(self, r: _Round, entries: list[Entry]) -> bool:
        """Send each entry to its consumer, or skip, hold or park it; False: the round stops."""
        sub, sole, quarantine = r.sub, r.sole, r.quarantine
        cursor, tracker = sub.cursor, sub.tracker
        for entry in entries:
            eid = entry.position.entry_id
            if cursor.is_acked(eid) or tracker.hold(entry):
                self.read_position = eid + 1
                continue
            if quarantine is not None and not quarantine.admit(entry):  # waits or is parked
                self.read_position = eid + 1
                if quarantine.full:
                    return False
                continue
            if r.throttled and not dispatch_rate.admit(sub, entry, self.schedule):
                return False  # the dispatch rate's window is full: woken when it turns
            target = sole if sole is not None else self._target(entry, r.plan)
            if target is None:
                if not self.defers:
                    return False
                self.read_position = eid + 1
                self._defer(entry, r.plan)
                if len(self._replay) >= MAX_REPLAY_PARKED:
                    return False
                continue
            self.read_position = eid + 1
            if target is not r.run:
                r.flush()
                r.run = target
            n = entry.num_messages
            frame = self._frame(sub, target, entry, quiet=n < r.room)
            r.room -= n
            r.frames.append(frame)
            r.run_frames += 1
            r.run_bytes += len(frame)
            if r.run_bytes >= RUN_WRITE_BYTES:  # written now: a full socket stops the round
                r.flush()
            r.sent += 1
            if r.sent >= self._limit:
                break
            if not (target.available if sole is not None else self.any_available()):
                break
        return True

    def _dispatch_replay(self, sub: DispatchedSubscription) -> int:
        if not self._replay:
            return 0
        sent = 0
        keep: list[int] = []
        ledger = sub.topic.ledger
        blocked: set[int] = set()
        quarantine = sub.quarantine if sub.quarantine.active else None
        for idx, eid in enumerate(self._replay):
            if not self.any_available() or sent >= self._limit:
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
            target.cnx.send(self._frame(sub, target, entry), consumer_id=target.consumer_id)
            sent += 1
        self._replay = keep
        return sent

    def _frame(self, sub: DispatchedSubscription, target: Consumer, entry: Entry, quiet: bool = False) -> bytes:
        """Record the delivery of `entry` to `target` and return its MESSAGE frame, which
        the caller writes before anything else goes to the target's connection."""
        eid = entry.position.entry_id
        sub.tracker.on_send(eid)
        ack_set = sub.cursor.batch_ack_set(eid)
        if sub.read_compacted:  # messages the compacted view left out count as acked
            ack_set = compacted_ack_set(sub, entry, ack_set)
        count = sub.hand_backs.count_to_send(sub.cursor.redelivery_count(eid), eid)
        if count and sub.sub_type in HAND_BACK_TYPES:
            note_sent(target, eid)
        return target.booked_message(entry, count, ack_set, quiet)

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


@dataclass(slots=True, eq=False)
class _Round:
    """One dispatch round: what it sent and examined, and the MESSAGE frames of consecutive
    entries for one consumer (`run`), written together (one write per run, or per
    RUN_WRITE_BYTES) after its bookkeeping. `sole`: the consumer every selection would pick
    while it is available (no selection per entry, no unacked-limit look while its bookings
    stay below `room`); `runs`: its entries are read as rows, in plain runs."""

    sub: DispatchedSubscription
    sent: int
    plan: Any
    quarantine: KeyQuarantine | None
    throttled: bool
    sole: Consumer | None
    room: int
    runs: bool
    examined: int = 0
    run: Consumer | None = None
    frames: list[bytes] = field(default_factory=list)
    run_bytes: int = 0
    run_frames: int = 0  # MESSAGE frames in `frames` (an item may hold a plain run's)

    def flush(self) -> None:
        """Send the frames waiting for the run's consumer, in one call."""
        run = self.run
        if run is not None and self.frames:
            run.cnx.send(b"".join(self.frames), consumer_id=run.consumer_id, count=self.run_frames)
            self.frames, self.run_bytes, self.run_frames = [], 0, 0
