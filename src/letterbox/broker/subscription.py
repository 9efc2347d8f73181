# A Subscription (Pulsar's PersistentSubscription) owns one cursor, its read
# position, a replay queue of entries to send again, and the dispatch loop.
# Invariants:
# - `read_position` is the next ledger entry never yet read for this
#   subscription; everything below it is acked, pending on a consumer, or in
#   the replay queue.
# - The replay queue is kept in entry order and served before new entries,
#   so redelivered messages are never overtaken by newer ones of the same
#   consumer (Exclusive/Failover) or key (Key_Shared).
# - Acks are applied to the cursor first, then removed from pending.
from __future__ import annotations

import asyncio
import bisect
import logging
import time
from typing import TYPE_CHECKING, Protocol

from letterbox.broker.dead_letter_router import move_to_dead_letter
from letterbox.broker.delayed_index import DelayedDeliveryTracker
from letterbox.broker.dispatchers import (
    EXCLUSIVE,
    FAILOVER,
    KEY_SHARED,
    SHARED,
    Dispatcher,
    KeySharedDispatcher,
    SingleActiveConsumerDispatcher,
    make_dispatcher,
)
from letterbox.errors import ConsumerBusy, NotAllowed
from letterbox.failure import FailurePolicy
from letterbox.message_properties import REASON_MAX_REDELIVERIES
from letterbox.protocol import parse_entry_metadata

if TYPE_CHECKING:
    from letterbox.broker.consumer import Consumer
    from letterbox.broker.topic import PersistentTopic
    from letterbox.storage.position import Position

log = logging.getLogger("letterbox.subscription")
READ_BATCH = 100
MAX_ENTRIES_PER_ROUND = 2000
MAX_EXAMINED_PER_ROUND = 20_000
MAX_REPLAY_PARKED = 10_000


class Cursor(Protocol):
    name: str

    @property
    def mark_delete(self) -> Position: ...
    def is_acked(self, entry_id: int) -> bool: ...
    def ack(self, entry_ids: list[int]) -> None: ...
    def ack_batch_indexes(self, entry_id: int, batch_size: int, acked_indexes: list[int]) -> bool: ...
    def ack_batch_mask(self, entry_id: int, batch_size: int, acked_mask: int) -> bool: ...
    def batch_ack_set(self, entry_id: int) -> list[int] | None: ...
    def ack_cumulative(self, entry_id: int) -> None: ...
    def reset(self, next_entry_id: int) -> None: ...
    def backlog(self) -> int: ...
    def redelivery_count(self, entry_id: int) -> int: ...
    def increment_redelivery(self, entry_ids: list[int]) -> None: ...
    def acked_indexes(self, entry_id: int) -> frozenset[int]: ...
    async def flush(self) -> None: ...


class Subscription:
    def __init__(self, topic: PersistentTopic, name: str, cursor: Cursor, durable: bool) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.sub_type: int | None = None
        self.dispatcher: Dispatcher | None = None
        self.read_position = cursor.mark_delete.entry_id + 1
        self._replay: list[int] = []
        self._dispatch_scheduled = False
        self.msg_redelivered = 0
        # non-durable only: a seek closed the consumers, keep the position for their return
        self.sought = False
        self._epoch = 0  # bumped by seeks, so late redeliveries of old positions are dropped
        # set by consumers' letterbox.* properties; None: the namespace's policy applies
        self.consumer_policy: FailurePolicy | None = None
        # entries held back until a time: delayed delivery (Shared/Key_Shared) and backoff
        self._delayed = DelayedDeliveryTracker()
        self._delay_timer: asyncio.TimerHandle | None = None
        self._delay_timer_at = 0
        # first/last delivery time of unacked entries, kept while a policy is set
        self._deliveries: dict[int, tuple[int, int]] = {}
        # Pulsar's blockedSubscriptionOnUnackedMsgs (set by broker/unacked_limits.py)
        self.blocked_on_unacked = False

    @property
    def policy(self) -> FailurePolicy:
        if self.consumer_policy is not None:
            return self.consumer_policy
        return self.topic.namespace_subscription_policy

    @policy.setter
    def policy(self, value: FailurePolicy) -> None:
        self.consumer_policy = value

    # --- consumers -------------------------------------------------------
    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers if self.dispatcher else []

    def add_consumer(self, consumer: Consumer, ks_auto_split: bool = True) -> None:
        if self.dispatcher is None or not self.dispatcher.consumers:
            if self.sub_type != consumer.sub_type or self.dispatcher is None:
                self.sub_type = consumer.sub_type
                self.dispatcher = make_dispatcher(
                    consumer.sub_type, self.topic.name.partition_index, ks_auto_split
                )
        elif consumer.sub_type != self.sub_type:
            raise ConsumerBusy(
                f"Subscription {self.name!r} is of a different type; a consumer is connected as "
                f"{_TYPE_NAMES[self.sub_type or 0]}"
            )
        d = self.dispatcher
        assert d is not None
        if isinstance(d, KeySharedDispatcher) and d.consumers:
            consumer.ks_fence = self.read_position
        d.add_consumer(consumer)
        consumer.subscription = self
        if isinstance(d, SingleActiveConsumerDispatcher):
            self._on_active_change(d)
        self.schedule_dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        d = self.dispatcher
        if d is None or consumer not in d.consumers:
            return
        consumer.closed = True
        d.remove_consumer(consumer)
        if consumer.pending:
            # The consumer went away holding messages. Count one delivery for the oldest
            # of them only: it is the one it was most likely processing (a poison message
            # that crashes its consumer still reaches the dead letter topic), while the
            # prefetched messages queued behind it were never seen and are not punished.
            head = next(iter(consumer.pending))
            before = self.cursor.redelivery_count(head)
            self.cursor.increment_redelivery([head])
            dl = self.policy.dead_letter
            if dl is not None and self.durable and before + 1 > dl.max_redeliver_count:
                del consumer.pending[head]
                self._settle([head], {head: before})
        self._park(list(consumer.pending))
        consumer.pending.clear()
        if isinstance(d, SingleActiveConsumerDispatcher):
            self._on_active_change(d)
        self.schedule_dispatch()

    def _on_active_change(self, d: SingleActiveConsumerDispatcher) -> None:
        previous, active = d.pick_active()
        if previous is not None and previous is not active and previous in d.consumers:
            # hand the old active consumer's unacked messages to the new one
            self._park(list(previous.pending))
            previous.pending.clear()
        d.notify_active()

    # --- flow, ack, redeliver ----------------------------------------------
    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        self.schedule_dispatch()

    def ack_individual(self, consumer: Consumer, items: list[tuple[int, list[int] | None]]) -> None:
        plain: list[int] = []
        for entry_id, ack_set in items:
            if ack_set:
                size = self._batch_size(consumer, entry_id)
                if size and self.cursor.ack_batch_mask(entry_id, size, _acked_mask(ack_set, size)):
                    self._drop_pending(consumer, entry_id)
            else:
                plain.append(entry_id)
        if plain:
            self.cursor.ack(plain)
            for entry_id in plain:
                self._drop_pending(consumer, entry_id)
        self._after_ack()

    def ack_cumulative(self, consumer: Consumer, entry_id: int, ack_set: list[int] | None) -> None:
        if self.sub_type in (SHARED, KEY_SHARED):
            raise NotAllowed("Cumulative acknowledgement is not allowed on Shared or Key_Shared subscriptions")
        upto = entry_id
        if ack_set:
            upto = entry_id - 1
            size = self._batch_size(consumer, entry_id)
            if size and self.cursor.ack_batch_mask(entry_id, size, _acked_mask(ack_set, size)):
                upto = entry_id
        if upto > self.cursor.mark_delete.entry_id:
            self.cursor.ack_cumulative(upto)
        for c in self.consumers:
            for eid in [e for e in c.pending if e <= upto]:
                del c.pending[eid]
        if self._replay and self._replay[0] <= upto:
            self._replay = [e for e in self._replay if e > upto]
        if self._deliveries:
            self._deliveries = {e: t for e, t in self._deliveries.items() if e > upto}
        self._after_ack()

    def _after_ack(self) -> None:
        d = self.dispatcher
        if isinstance(d, KeySharedDispatcher) and any(c.ks_fence is not None for c in d.consumers):
            self.schedule_dispatch()
        self.topic.on_cursor_moved()

    def _batch_size(self, consumer: Consumer, entry_id: int) -> int:
        n = consumer.pending.get(entry_id)
        if n is None:
            entry = self.topic.ledger.read_entry(entry_id)
            n = entry.num_messages if entry is not None else 0
        return n

    def settle_acknowledged(self, entry_id: int) -> None:
        """An entry acknowledged outside a consumer's ACK (a broker-side move): forget it."""
        self._drop_pending(None, entry_id)
        self._after_ack()

    def _drop_pending(self, consumer: Consumer | None, entry_id: int) -> None:
        if self._deliveries:
            self._deliveries.pop(entry_id, None)
        if consumer is not None and consumer.pending.pop(entry_id, None) is not None:
            return
        for c in self.consumers:
            if c.pending.pop(entry_id, None) is not None:
                return
        i = bisect.bisect_left(self._replay, entry_id)
        if i < len(self._replay) and self._replay[i] == entry_id:
            del self._replay[i]

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """Nack, ack timeout or redeliver-all: count one more delivery for each message,
        dead-letter those past the policy's maximum, make the counts durable, then put
        the rest back in line (after the backoff delay, if the policy has one)."""
        if entry_ids is None:
            ids = list(consumer.pending)
            consumer.pending.clear()
        else:
            ids = [e for e in entry_ids if consumer.pending.pop(e, None) is not None]
        if not ids:
            return
        self.msg_redelivered += len(ids)
        before = {e: self.cursor.redelivery_count(e) for e in ids}
        self.cursor.increment_redelivery(ids)
        self._settle(ids, before)

    def _settle(self, ids: list[int], before: dict[int, int]) -> None:
        dl = self.policy.dead_letter if self.durable else None
        if dl is None:
            dead: list[int] = []
            back = ids
        else:
            limit = dl.max_redeliver_count
            count = self.cursor.redelivery_count
            dead = [e for e in ids if count(e) > limit]
            back = [e for e in ids if count(e) <= limit] if dead else ids
        backoff = self.policy.backoff
        epoch = self._epoch

        async def settle() -> None:
            try:
                if dead and dl is not None:
                    try:
                        await move_to_dead_letter(self, dead, REASON_MAX_REDELIVERIES, dl.dead_letter_topic,
                                                  dl.initial_subscription_name)
                    except Exception:
                        log.exception("dead-lettering failed on %s/%s; redelivering", self.topic.name, self.name)
                        back.extend(dead)
                await self.cursor.flush()
            finally:
                if epoch == self._epoch:  # a seek in between makes these ids stale
                    if backoff is None:
                        self._park(back)
                    else:
                        # the delay runs from the last delivery, so the client's own
                        # nack delay does not stretch the gaps between deliveries
                        now = _now_ms()
                        for e in back:
                            last = self._deliveries.get(e, (now, now))[1]
                            self.delay(e, last + backoff.delay_ms(before.get(e, 0)))
                    self.schedule_dispatch()

        self.topic.service.track(asyncio.ensure_future(settle()))

    # --- delayed entries -----------------------------------------------------
    def delay(self, entry_id: int, deliver_at_ms: int) -> None:
        """Hold an entry back until `deliver_at_ms`, then queue it for dispatch."""
        if not self._delayed.add(entry_id, deliver_at_ms):
            self._park([entry_id])
            return
        self._arm_delay_timer()

    def _arm_delay_timer(self) -> None:
        due = self._delayed.next_due_ms()
        if due is None:
            return
        if self._delay_timer is not None:
            if self._delay_timer_at <= due:
                return
            self._delay_timer.cancel()
        loop = asyncio.get_running_loop()
        self._delay_timer_at = due
        self._delay_timer = loop.call_later(max(0.0, (due - _now_ms()) / 1000), self._on_delay_timer)

    def _on_delay_timer(self) -> None:
        self._delay_timer = None
        due = self._delayed.pop_due(_now_ms())
        if due:
            self._park(due)
            self.schedule_dispatch()
        self._arm_delay_timer()

    def delayed_count(self) -> int:
        return len(self._delayed)

    # --- dead-letter bookkeeping ---------------------------------------------
    def delivery_times(self, entry_id: int) -> tuple[int, int]:
        return self._deliveries.get(entry_id, (0, 0))

    def forget_delivery(self, entry_id: int) -> None:
        self._deliveries.pop(entry_id, None)

    def _park(self, entry_ids: list[int]) -> None:
        if len(entry_ids) > 64:  # many at once (a big nack round): one merge, not n inserts
            self._replay = sorted(set(self._replay).union(entry_ids))
            return
        for eid in entry_ids:
            i = bisect.bisect_left(self._replay, eid)
            if i == len(self._replay) or self._replay[i] != eid:
                self._replay.insert(i, eid)

    def reset_to(self, next_entry_id: int) -> None:
        """Seek: everything before `next_entry_id` counts as acked, the rest is unacked."""
        self.cursor.reset(next_entry_id)
        self._epoch += 1
        self._delayed.clear()
        self._deliveries.clear()
        self.read_position = next_entry_id
        self._replay.clear()
        for c in self.consumers:
            c.pending.clear()
        self.topic.on_cursor_moved()

    # --- dispatch ----------------------------------------------------------
    def schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled:
            self._dispatch_scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        d = self.dispatcher
        if d is None or not d.consumers or not d.any_available():
            return
        sent = self._dispatch_replay(d)
        ledger = self.topic.ledger
        last = ledger.last_confirmed.entry_id
        ks = d if isinstance(d, KeySharedDispatcher) else None
        parked = self._parked_hashes(ks) if ks is not None and self._replay else set()
        # delayed delivery is honoured on Shared and Key_Shared only, as in Pulsar
        delays = self.sub_type in (SHARED, KEY_SHARED)
        now = _now_ms()
        examined = 0
        while (
            self.read_position <= last
            and sent < MAX_ENTRIES_PER_ROUND
            and examined < MAX_EXAMINED_PER_ROUND
            and d.any_available()
        ):
            if self.read_position < ledger.first_position.entry_id:
                self.read_position = ledger.first_position.entry_id
            entries = ledger.read_entries(self.read_position, READ_BATCH)
            if not entries:
                break
            examined += len(entries)
            for entry in entries:
                eid = entry.position.entry_id
                if self.cursor.is_acked(eid):
                    self.read_position = eid + 1
                    continue
                if delays:
                    at = self._deliver_at(entry)
                    if at > now and self._delayed.add(eid, at):
                        self.read_position = eid + 1
                        self._arm_delay_timer()
                        continue
                if ks is not None:
                    target = self._ks_target(ks, entry, parked)
                    self.read_position = eid + 1
                    if target is None:
                        parked.add(ks.key_hash(entry))
                        self._park([eid])
                        if len(self._replay) >= MAX_REPLAY_PARKED:
                            return
                        continue
                else:
                    target = d.select(entry, False)
                    if target is None:
                        return
                    self.read_position = eid + 1
                self._send(target, entry)
                sent += 1
                if not d.any_available():
                    break
        if sent >= MAX_ENTRIES_PER_ROUND or examined >= MAX_EXAMINED_PER_ROUND:
            self.schedule_dispatch()  # yield to other connections, then go on

    def _dispatch_replay(self, d: Dispatcher) -> int:
        if not self._replay:
            return 0
        sent = 0
        ks = d if isinstance(d, KeySharedDispatcher) else None
        keep: list[int] = []
        ledger = self.topic.ledger
        blocked: set[int] = set()
        for idx, eid in enumerate(self._replay):
            if not d.any_available() or sent >= MAX_ENTRIES_PER_ROUND:
                keep.extend(self._replay[idx:])
                break
            if self.cursor.is_acked(eid):
                continue
            if ks is not None:
                # skip entries of busy keys without reading them from the ledger
                cached = ks.cached_hash(eid)
                if cached is not None and (cached in blocked or not ks.owner_available(cached)):
                    blocked.add(cached)
                    keep.append(eid)
                    continue
            entry = ledger.read_entry(eid)
            if entry is None:
                continue
            if ks is not None:
                h = ks.key_hash(entry)
                target = None if h in blocked else self._ks_target(ks, entry, None)
                if target is None:
                    blocked.add(h)
                    keep.append(eid)
                    continue
            else:
                target = d.select(entry, True)
                if target is None:
                    keep.extend(self._replay[idx:])
                    break
            self._send(target, entry)
            sent += 1
        self._replay = keep
        return sent

    def _send(self, target: Consumer, entry: Entry_) -> None:
        eid = entry.position.entry_id
        policy = self.policy
        if policy.dead_letter is not None or policy.backoff is not None:
            now = _now_ms()
            first = self._deliveries.get(eid, (now, now))[0]
            self._deliveries[eid] = (first, now)
        target.send_entry(entry, self.cursor.redelivery_count(eid), self.cursor.batch_ack_set(eid))

    def _deliver_at(self, entry: Entry_) -> int:
        meta = parse_entry_metadata(entry.data)
        return meta.deliver_at_time if meta.HasField("deliver_at_time") else 0

    def _ks_target(
        self, d: KeySharedDispatcher, entry: Entry_, parked: set[int] | None
    ) -> Consumer | None:
        """Key_Shared target for an entry; `parked` (new entries only) holds the
        hashes of replay entries, which must go first."""
        owner = d.owner(entry)
        if owner is None or not owner.available:
            return None
        eid = entry.position.entry_id
        if parked and d.key_hash(entry) in parked:
            return None
        fence = owner.ks_fence
        if fence is not None:
            if self.cursor.mark_delete.entry_id >= fence - 1:
                owner.ks_fence = None
            elif eid >= fence:
                return None
        return owner

    def _parked_hashes(self, d: KeySharedDispatcher) -> set[int]:
        ledger = self.topic.ledger
        hashes: set[int] = set()
        for eid in self._replay:
            h = d.cached_hash(eid)
            if h is None:
                entry = ledger.read_entry(eid)
                if entry is None:
                    continue
                h = d.key_hash(entry)
            hashes.add(h)
        return hashes

    # --- stats -------------------------------------------------------------
    def backlog(self) -> int:
        return self.cursor.backlog()

    def unacked(self) -> int:
        return sum(sum(c.pending.values()) for c in self.consumers)


if TYPE_CHECKING:
    from letterbox.storage.entry import Entry as Entry_

_TYPE_NAMES = {EXCLUSIVE: "Exclusive", SHARED: "Shared", FAILOVER: "Failover", KEY_SHARED: "Key_Shared"}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _acked_mask(words: list[int], size: int) -> int:
    """An ack's ack_set has a bit SET for each index still unacked (java.util.BitSet
    long words); return the mask of acked indexes instead."""
    unacked = 0
    for i, w in enumerate(words):
        unacked |= (w & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
    return ((1 << size) - 1) & ~unacked
