# Topics: PersistentTopic (a managed ledger plus its subscriptions) and
# NonPersistentTopic (dispatch-or-drop, nothing stored). A topic owns its
# producers and subscriptions; the publish path is producer -> topic ->
# ledger append -> (durable) -> receipt, and every durable append wakes the
# dispatchers of subscriptions that have consumers.
from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from letterbox.broker.policies import termination_record
from letterbox.broker.policies.topic_policies import TopicLimits, limits_for
from letterbox.broker.topics import backlog_quota
from letterbox.broker.topics.dispatchers import make_dispatcher
from letterbox.broker.topics.memory_cursor import MemoryCursor
from letterbox.broker.topics.producer import (
    EXCLUSIVE,
    EXCLUSIVE_WITH_FENCING,
    SHARED,
    WAIT_FOR_EXCLUSIVE,
    Producer,
)
from letterbox.broker.topics.subscription import Subscription
from letterbox.errors import ConsumerBusy, NotAllowed, ProducerBusy, ProducerFenced
from letterbox.failure import FailurePolicy
from letterbox.failure.events import is_failure_events_topic
from letterbox.storage.append_run import reserve_row
from letterbox.storage.entry import UNREAD
from letterbox.storage.position import Position

if TYPE_CHECKING:
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.topic_broker import TopicBroker
    from letterbox.storage.entry import Entry
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.ops import WriteOp
    from letterbox.topic_name import TopicName



class Topic:
    """What both topic kinds share: producers and their access modes."""

    def __init__(self, service: TopicBroker, name: TopicName) -> None:
        self.service = service
        self.name = name
        self.producers: list[Producer] = []
        self._exclusive_waiters: list[tuple[Producer, asyncio.Future[None]]] = []
        self.msg_in = 0
        self.bytes_in = 0
        self.schema: bytes | None = None
        # raised each time an exclusive producer takes the topic (kept in memory only)
        self.topic_epoch: int | None = None
        # the last position of a terminated topic (topics/topic_termination.py), else None
        self.terminated: Position | None = None
        # namespace limits (broker/policies/topic_policies.py); a persistent topic refreshes them
        self.limits: TopicLimits = limits_for(service, name)

    def add_producer(self, producer: Producer, client_epoch: int | None = None) -> asyncio.Future[None] | None:
        """Attach a producer. Returns a future when it must wait for exclusivity.
        As Pulsar: Shared is ProducerBusy beside an exclusive producer (or a queued one);
        Exclusive is ProducerFenced beside any producer; ExclusiveWithFencing closes every
        producer (CLOSE_PRODUCER) and fails queued WaitForExclusive producers, then takes
        over. A reconnecting exclusive or waiting producer whose `client_epoch` is older than
        the topic's was fenced meanwhile and is refused with ProducerFenced."""
        mode = producer.access_mode
        holder = next((p for p in self.producers if p.access_mode != SHARED), None)
        if mode == SHARED:
            if holder is not None or self._exclusive_waiters:
                owner = holder.name if holder is not None else self._exclusive_waiters[0][0].name
                raise ProducerBusy(f"Topic {self.name} has an existing exclusive producer: {owner}")
        elif mode == EXCLUSIVE:
            if holder is not None or self._exclusive_waiters:
                owner = holder.name if holder is not None else self._exclusive_waiters[0][0].name
                raise ProducerFenced(f"Topic {self.name} has an existing exclusive producer: {owner}")
            if self.producers:
                raise ProducerFenced(f"Topic {self.name} has existing shared producers")
            self._check_epoch(client_epoch)
        elif mode == EXCLUSIVE_WITH_FENCING:
            self._check_epoch(client_epoch)  # a fenced producer coming back does not fence its successor
            self._fence_everyone()
        elif mode == WAIT_FOR_EXCLUSIVE:
            # a producer coming back with an epoch the topic has moved past was fenced: it is
            # refused at once rather than queued behind its successor
            self._check_epoch(client_epoch)
            if self.producers:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._exclusive_waiters.append((producer, fut))
                return fut
        if any(p.name == producer.name for p in self.producers):
            raise ProducerBusy(f"Producer with name {producer.name!r} is already connected to topic {self.name}")
        self.producers.append(producer)
        if mode != SHARED:
            self._grant_epoch(producer, client_epoch)
        return None

    def _check_epoch(self, client_epoch: int | None) -> None:
        if client_epoch is not None and self.topic_epoch is not None and client_epoch < self.topic_epoch:
            raise ProducerFenced(
                f"Topic {self.name} epoch has already moved. Current epoch: {self.topic_epoch}, "
                f"Producer epoch: {client_epoch}"
            )

    def _grant_epoch(self, producer: Producer, client_epoch: int | None) -> None:
        if client_epoch is None:
            client_epoch = 0 if self.topic_epoch is None else self.topic_epoch + 1
        self.topic_epoch = producer.topic_epoch = client_epoch

    def _fence_everyone(self) -> None:
        """ExclusiveWithFencing: queued producers fail, connected ones are closed."""
        waiters, self._exclusive_waiters = self._exclusive_waiters, []
        for _p, fut in waiters:
            if not fut.done():
                fut.set_exception(ProducerFenced(f"Fenced out of topic {self.name}"))
        self.close_producers()

    def close_producers(self) -> None:
        """Tell each producer's client to close it (CLOSE_PRODUCER) and detach it."""
        for producer in list(self.producers):
            producer.cnx.close_producer(producer.producer_id)
            self.remove_producer(producer)

    def remove_producer(self, producer: Producer) -> None:
        producer.closed = True
        if producer in self.producers:
            self.producers.remove(producer)
        self._exclusive_waiters = [(p, f) for p, f in self._exclusive_waiters if p is not producer]
        if not self.producers and self._exclusive_waiters:
            p, fut = self._exclusive_waiters.pop(0)
            self.producers.append(p)
            self._grant_epoch(p, None)
            if not fut.done():
                fut.set_result(None)

    # --- admin ---------------------------------------------------------------
    def client_count(self) -> int:
        """Connected producers plus consumers (the admin API refuses to delete a busy topic)."""
        subs = getattr(self, "subscriptions", {})
        return len(self.producers) + sum(len(s.consumers) for s in subs.values())

    def close_clients(self) -> None:
        """Admin force-delete: tell every producer and consumer to go away and detach them."""
        self.close_producers()
        subs = getattr(self, "subscriptions", {})
        for sub in list(subs.values()):
            for consumer in list(sub.consumers):
                consumer.cnx.close_consumer(consumer.consumer_id)
                self.service.detach_consumer(consumer)


class PersistentTopic(Topic):
    def __init__(self, service: TopicBroker, name: TopicName, ledger: ManagedLedger) -> None:
        super().__init__(service, name)
        self.ledger = ledger
        self.terminated = termination_record.load(service.store, name)
        self.quota_listener: Callable[[Position], None] | None = None  # backlog_quota.attach's check
        self.refresh_policies()
        self.subscriptions: dict[str, Subscription] = {}
        for cname, cursor in ledger.cursors().items():
            self.subscriptions[cname] = Subscription(self, cname, cursor, durable=True)
        ledger.add_confirm_listener(self._on_confirmed)
        self._reader_ids = itertools.count()

    def _on_confirmed(self, position: Position) -> None:
        for sub in self.subscriptions.values():
            if sub.consumers:
                sub.schedule_dispatch()

    def reserve_publish(
        self, producer: Producer, ops: list[WriteOp], data: bytes, num_messages: int, publish_time: int,
        sequence_id: int, deliver_at_time: int | None = UNREAD,
    ) -> int:
        """Publish an entry: its id is assigned now (returned) and its append added to `ops`,
        stored later with the producer's others of the same pass as one run
        (ledger.submit_appends; connection/send_batch.py, storage/append_run.py)."""
        self.msg_in += num_messages
        self.bytes_in += len(data)
        dedup = self._deduplication
        return reserve_row(
            self.ledger, ops, data, num_messages, publish_time, producer.name if dedup else None,
            sequence_id if dedup else None, deliver_at_time,
        )

    def refresh_policies(self) -> None:
        """Take up the namespace's policies (falling back to the broker's configuration):
        at load, and whenever the namespace's policies change. Kept here so the publish
        and dispatch paths read attributes instead of resolving them per message."""
        policies = self.service.namespace_policies
        ns = self.name.namespace_name
        self.ledger.retention_ms = policies.retention_ms(ns)
        self.ledger.retention_bytes = policies.retention_bytes(ns)
        self.ledger.replay_ms = self.service.config.acked_replay_minutes * 60_000
        self.ledger.replay_entries = self.service.config.acked_replay_max_entries
        self._deduplication = policies.deduplication(ns)
        self.namespace_subscription_policy = policies.subscription_policy(ns)
        self.limits = limits_for(self.service, self.name)
        if is_failure_events_topic(str(self.name)):  # its own retention; no quota, no DLQ policy
            events = policies.get(ns).failure_events
            self.ledger.retention_ms, self.ledger.retention_bytes = events.retention_ms, events.retention_bytes
            self.namespace_subscription_policy = FailurePolicy()
            self.limits = dataclasses.replace(self.limits, backlog_quota=None)
        backlog_quota.attach(self)
        if self.service.config.pulsar_compatible_only:  # no broker-side dead-letter/backoff policy
            self.namespace_subscription_policy = FailurePolicy()

    def deduplication_enabled(self) -> bool:
        """The namespace's deduplication policy, else the broker's configuration."""
        return self._deduplication

    def subscription_for(
        self,
        name: str,
        durable: bool,
        initial_position: str,
        start_entry_id: int | None,
    ) -> Subscription:
        sub = self.subscriptions.get(name)
        if sub is not None:
            if sub.durable != durable:
                raise NotAllowed(
                    f"Subscription {name!r} exists as a {'durable' if sub.durable else 'non-durable'} subscription"
                )
            if not durable and sub.sought:
                sub.sought = False
            elif not durable and start_entry_id is not None and not sub.consumers:
                sub.reset_to(start_entry_id)
            return sub
        if durable:
            cursor = self.ledger.open_cursor(name, "earliest" if initial_position == "earliest" else "latest")
            sub = Subscription(self, name, cursor, durable=True)
        else:
            if start_entry_id is None:
                start_entry_id = (
                    self.ledger.first_position.entry_id
                    if initial_position == "earliest"
                    else self.ledger.last_confirmed.entry_id + 1
                )
            sub = Subscription(self, name, MemoryCursor(name, self.ledger, start_entry_id - 1), durable=False)
        self.subscriptions[name] = sub
        return sub

    def remove_subscription(self, name: str) -> None:
        self.subscriptions.pop(name, None)

    def on_cursor_moved(self) -> None:
        """Hook for acks and seeks; the ledger schedules its own (debounced) trimming."""

    def entry_id_for(self, ledger_id: int, entry_id: int) -> int:
        """Map a client-given message id onto this ledger's entry ids."""
        if ledger_id == self.ledger.ledger_id:
            return max(entry_id, self.ledger.first_position.entry_id)
        if ledger_id > self.ledger.ledger_id or ledger_id >= 2**63 - 1:
            return self.ledger.last_confirmed.entry_id + 1
        return self.ledger.first_position.entry_id

    def backlog(self) -> int:
        return sum(s.backlog() for s in self.subscriptions.values())


class NonPersistentTopic(Topic):
    """No storage: a message goes to a consumer with permits right away or is dropped."""

    def __init__(self, service: TopicBroker, name: TopicName, ledger_id: int) -> None:
        super().__init__(service, name)
        self.ledger_id = ledger_id
        self._next_entry = 0
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.msg_dropped = 0

    def publish_now(self, data: bytes, num_messages: int) -> Position:
        pos = Position(self.ledger_id, self._next_entry)
        self._next_entry += 1
        self.msg_in += num_messages
        self.bytes_in += len(data)
        for sub in self.subscriptions.values():
            if not sub.deliver(pos, data, num_messages):
                self.msg_dropped += num_messages
        return pos


class NonPersistentSubscription:
    def __init__(self, topic: NonPersistentTopic, name: str) -> None:
        self.topic = topic
        self.name = name
        self.sub_type: int | None = None
        self.dispatcher = make_dispatcher(0, topic.name.partition_index, True)

    def deliver(self, pos: Position, data: bytes, num_messages: int) -> bool:
        from letterbox.storage.entry import Entry

        entry: Entry = Entry(pos, data, num_messages, 0)
        target = self.dispatcher.select(entry, False)
        if target is None:
            return False
        target.send_raw(pos.ledger_id, pos.entry_id, num_messages, data)
        return True

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers

    def add_consumer(self, consumer: Consumer, ks_auto_split: bool = True) -> None:
        if not self.dispatcher.consumers:
            self.sub_type = consumer.sub_type
            self.dispatcher = make_dispatcher(consumer.sub_type, self.topic.name.partition_index, ks_auto_split)
        elif consumer.sub_type != self.sub_type:
            raise ConsumerBusy(f"Subscription {self.name!r} is of a different type")
        self.dispatcher.add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        self.dispatcher.remove_consumer(consumer)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
