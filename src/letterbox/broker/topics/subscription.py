# A Subscription (Pulsar's PersistentSubscription) owns one cursor, its
# consumers, their acknowledgements and seeks. The read loop and the replay
# queue are its dispatcher's (dispatcher.py, one class per subscription type);
# what happens to messages that come back or must wait is its redelivery
# tracker's (redelivery_tracker.py, which asks letterbox.failure.decide()).
# Invariants:
# - Acks are applied to the cursor first, then removed from pending.
# - The dispatcher is replaced only while it has no consumer, and the new one
#   takes over its read position and replay queue.
# It sees its topic as SubscriptionTopic (topic.PersistentTopic meets it, and so does it
# what the rooms below see of a subscription's topic), so that the topic can hold it.
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from letterbox import failure
from letterbox.broker.policies.bounded import BoundedTopic
from letterbox.broker.policies.topic_policies import check_new_consumer
from letterbox.broker.redelivery.key_quarantine import KeyQuarantine
from letterbox.broker.redelivery.redelivery_tracker import RedeliveryTracker
from letterbox.broker.redelivery.tracked import TrackedTopic
from letterbox.broker.topics.consumer import SUB_TYPE_NAMES
from letterbox.broker.topics.dispatched import Cursor
from letterbox.broker.topics.dispatcher import Dispatcher
from letterbox.broker.topics.dispatchers import make_dispatcher
from letterbox.broker.topics.end_of_topic import notify_end_of_topic
from letterbox.broker.topics.hand_backs import HAND_BACK_TYPES, HandBacks
from letterbox.errors import ConsumerBusy, NotAllowed

if TYPE_CHECKING:
    import asyncio

    from letterbox.broker.policies.topic_policies import TopicLimits
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.topic_broker import TopicBroker


# how long a non-durable subscription emptied by a seek waits for its reader to re-subscribe
# (the official clients do so within their reconnect backoff, 100 ms at first)
SOUGHT_GRACE_S = 10.0


class SubscriptionTopic(TrackedTopic, BoundedTopic, Protocol):
    namespace_subscription_policy: failure.FailurePolicy

    @property
    def service(self) -> TopicBroker: ...
    @property
    def limits(self) -> TopicLimits: ...
    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...

    def subscription_for(
        self, name: str, durable: bool, initial_position: str, start_entry_id: int | None
    ) -> Subscription: ...
    def remove_subscription(self, name: str) -> None: ...
    def on_cursor_moved(self) -> None: ...


class Subscription:
    def __init__(self, topic: SubscriptionTopic, name: str, cursor: Cursor, durable: bool) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.sub_type: int | None = None
        self.dispatcher = Dispatcher(self)  # no consumer yet: selects nobody
        self.tracker = RedeliveryTracker(self)
        self.quarantine = KeyQuarantine(self)  # letterbox.dlq.on_key_failure=park
        self.hand_backs = HandBacks()  # counts lowered for messages handed back unseen
        # non-durable only: a seek closed the consumers, keep the position for their return
        # (for SOUGHT_GRACE_S at most: a client killed before returning leaves nothing behind)
        self.sought = False
        self._sought_seq = 0
        # set by consumers' letterbox.* properties; None: the namespace's policy applies
        self.consumer_policy: failure.FailurePolicy | None = None
        self.topic_role = failure.topic_role(str(topic.name))
        # Pulsar's blockedSubscriptionOnUnackedMsgs (set by broker/policies/unacked_limits.py)
        self.blocked_on_unacked = False
        self.msg_expired = 0  # messages expired by the namespace's message TTL (pulsar_subscription_msg_rate_expired)
        # a consumer subscribed with read_compacted: reads go through the topic's compacted
        # view up to its horizon (broker/compaction/compacted_reads.py)
        self.read_compacted = False

    def mark_sought(self) -> None:
        """A seek closed this non-durable subscription's consumers: keep it for their return,
        and drop it if none has come back (and no later seek renewed it) after SOUGHT_GRACE_S."""
        self.sought = True
        self._sought_seq += 1
        seq = self._sought_seq
        asyncio.get_running_loop().call_later(SOUGHT_GRACE_S, self._drop_if_abandoned, seq)

    def _drop_if_abandoned(self, seq: int) -> None:
        if seq == self._sought_seq and self.sought and not self.consumers \
                and self.topic.subscriptions.get(self.name) is self:
            self.sought = False
            self.topic.remove_subscription(self.name)

    @property
    def redelivery(self) -> RedeliveryTracker:
        """The redelivery tracker: counts, delays and the attempt log (`attempts`,
        `last_failure_reason`)."""
        return self.tracker

    @property
    def policy(self) -> failure.FailurePolicy:
        if self.consumer_policy is not None:
            return self.consumer_policy
        return self.topic.namespace_subscription_policy

    @policy.setter
    def policy(self, value: failure.FailurePolicy) -> None:
        self.consumer_policy = value

    # --- consumers -------------------------------------------------------
    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers

    @property
    def read_position(self) -> int:
        return self.dispatcher.read_position

    def add_consumer(self, consumer: Consumer, ks_auto_split: bool = True) -> None:
        check_new_consumer(self.topic)  # maxConsumersPerTopic
        d = self.dispatcher
        if not d.consumers:
            if self.sub_type != consumer.sub_type:  # None: the first consumer ever
                self.sub_type = consumer.sub_type
                d = self.dispatcher = make_dispatcher(
                    consumer.sub_type, self.topic.name.partition_index, ks_auto_split, self, carry=d
                )
        elif consumer.sub_type != self.sub_type:
            raise ConsumerBusy(
                f"Subscription {self.name!r} is of a different type; a consumer is connected as "
                f"{SUB_TYPE_NAMES[self.sub_type or 0]}"
            )
        d.add_consumer(consumer)
        consumer.subscription = self
        d.schedule()
        if self.topic.terminated is not None:
            notify_end_of_topic(self)

    def remove_consumer(self, consumer: Consumer) -> None:
        d = self.dispatcher
        if consumer not in d.consumers:
            return
        consumer.closed = True
        d.remove_consumer(consumer)
        if consumer.pending:
            # The consumer went away holding messages. Count one delivery for the oldest
            # of them only: it is the one it was most likely processing (a poison message
            # that crashes its consumer still reaches the dead letter topic), while the
            # prefetched messages queued behind it were never seen and are not punished.
            head = next(iter(consumer.pending))
            if self.tracker.consumer_gone(head, consumer):
                del consumer.pending[head]
        d.park(list(consumer.pending))
        consumer.pending.clear()
        d.schedule()

    # --- flow, ack, redeliver ----------------------------------------------
    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        self.dispatcher.schedule()

    def ack_individual(self, consumer: Consumer, items: list[tuple[int, list[int] | None]],
                       plain: list[int] | None = None) -> None:
        """Individual acks: `items` (entry id, ack set or None) in order, then the whole
        entries of `plain` (the caller may split them off beforehand: same result)."""
        if plain is None:
            plain = []
        for entry_id, ack_set in items:
            if ack_set:
                size = self._batch_size(consumer, entry_id)
                if size and self.cursor.ack_batch_mask(entry_id, size, _acked_mask(ack_set, size)):
                    self._drop_pending(consumer, entry_id)
            else:
                plain.append(entry_id)
        if plain:
            self.cursor.ack(plain)
            if self.quarantine.out_entries:  # what _drop_pending tells it (nothing to tell: empty)
                settled = self.quarantine.settled
                for entry_id in plain:
                    settled(entry_id)
            for entry_id in consumer.pending.discard_many(plain):
                self._drop_pending(None, entry_id)
        breaker = self.tracker.circuit
        if breaker.circuit is not None:  # outage detection: acks are the window's successes
            acked = plain + [e for e, ack_set in items if ack_set]
            breaker.succeeded(acked, len(acked))
        self._after_ack()

    def ack_cumulative(self, consumer: Consumer, entry_id: int, ack_set: list[int] | None) -> None:
        if not self.dispatcher.cumulative_ack:
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
        self.dispatcher.unpark_through(upto)
        self.hand_backs.forget_through(upto)
        if self.quarantine.out_entries:
            self.quarantine.settled_through(upto)
        self.tracker.circuit.acked_through(upto)
        self._after_ack()

    def _after_ack(self) -> None:
        self.dispatcher.on_acked()
        self.topic.on_cursor_moved()
        if self.topic.terminated is not None:
            notify_end_of_topic(self)

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
        self.hand_backs.forget(entry_id)
        if self.quarantine.out_entries:  # (empty unless park is on: no work per ack otherwise)
            self.quarantine.settled(entry_id)
        if consumer is not None and consumer.pending.pop(entry_id, None) is not None:
            return
        for c in self.consumers:
            if c.pending.pop(entry_id, None) is not None:
                return
        self.dispatcher.unpark(entry_id)

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """Nack, ack timeout (entry_ids given) or redeliver-all (None): the tracker
        counts one more delivery for each message and decides where it goes."""
        back: list[int] = []  # handed back unseen (hand_backs.py): queued again, not counted
        if entry_ids is None:
            ids = list(consumer.pending)
            consumer.pending.clear()
            event: failure.Event = failure.RedeliverAll()
            if self.sub_type in HAND_BACK_TYPES:  # handed back unseen: not a delivery
                ids, back = self.hand_backs.sort(consumer, ids)
            if ids and self.quarantine.active:  # park: only the oldest counts (key_quarantine)
                ids = self.quarantine.counted_on_redeliver_all(ids)
        else:
            # the consumer's pending messages among them, each once, in request order (one
            # pending-ack change for the request, not one per id)
            ids = list(dict.fromkeys(entry_ids))
            absent = consumer.pending.discard_many(ids)
            if absent:
                gone = set(absent)
                ids = [e for e in ids if e not in gone]
            event = failure.Nack()
        if ids:
            self.tracker.redeliver(ids, event, consumer, back)
        elif back:
            self.dispatcher.park(back)
            self.dispatcher.schedule()

    def reset_to(self, next_entry_id: int) -> None:
        """Seek: everything before `next_entry_id` counts as acked, the rest is unacked."""
        self.cursor.reset(next_entry_id)
        self.tracker.reset()
        self.quarantine.reset()
        self.hand_backs.reset()
        self.dispatcher.reset(next_entry_id)
        for c in self.consumers:
            c.pending.clear()
        self.topic.on_cursor_moved()

    def schedule_dispatch(self) -> None:
        self.dispatcher.schedule()

    # --- stats -------------------------------------------------------------
    @property
    def msg_redelivered(self) -> int:
        return self.tracker.msg_redelivered

    def delayed_count(self) -> int:
        return self.tracker.delayed_count()

    def backlog(self) -> int:
        return self.cursor.backlog()

    def unacked(self) -> int:
        return sum(sum(c.pending.values()) for c in self.consumers)


def _acked_mask(words: list[int], size: int) -> int:
    """An ack's ack_set has a bit SET for each index still unacked (java.util.BitSet
    long words); return the mask of acked indexes instead."""
    unacked = 0
    for i, w in enumerate(words):
        unacked |= (w & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
    return ((1 << size) - 1) & ~unacked


def subscription_of(consumer: Consumer) -> Subscription | None:
    """The subscription `consumer` is attached to, as the handlers use it (only a
    Subscription attaches itself to a consumer: add_consumer)."""
    sub = consumer.subscription
    assert sub is None or isinstance(sub, Subscription)
    return sub
