# Consumer selection per subscription type (Pulsar's Dispatcher
# implementations), on top of the read loop of dispatcher.py:
# - SingleActiveConsumerDispatcher (Exclusive, Failover): everything goes to
#   the one active consumer; when it changes, the old one's unacked messages
#   are handed to the new one.
# - SharedDispatcher: round-robin over consumers that have permits.
# - KeySharedDispatcher (key_shared_dispatcher.py): hash ranges.
# `make_dispatcher` is the one place that maps a subscription type to a class.
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.broker.topics.dispatcher import Dispatcher
from letterbox.broker.topics.key_shared_dispatcher import KeySharedDispatcher
from letterbox.errors import ConsumerBusy
from letterbox.protocol import commands

if TYPE_CHECKING:
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.dispatched import DispatchedSubscription
    from letterbox.storage.entry import Entry

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = 0, 1, 2, 3

__all__ = ["EXCLUSIVE", "FAILOVER", "KEY_SHARED", "SHARED", "Dispatcher", "make_dispatcher"]


class SingleActiveConsumerDispatcher(Dispatcher):
    """Exclusive and Failover: everything goes to the one active consumer."""

    def __init__(
        self, sub: DispatchedSubscription | None, sub_type: int, partition_index: int, carry: Dispatcher | None
    ) -> None:
        super().__init__(sub, carry)
        self.sub_type = sub_type
        self.partition_index = partition_index
        self.active: Consumer | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        if self.consumers and self.sub_type == EXCLUSIVE:
            raise ConsumerBusy("Exclusive consumer is already connected")
        super().add_consumer(consumer)

    def consumers_changed(self) -> None:
        previous = self.active
        if not self.consumers:
            self.active = None
        else:
            ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name, c.consumer_id))
            top = [c for c in ordered if c.priority_level == ordered[0].priority_level]
            index = self.partition_index % len(top) if self.partition_index >= 0 else 0
            self.active = top[index]
        if previous is not None and previous is not self.active and previous in self.consumers:
            # hand the old active consumer's unacked messages to the new one
            self.park(list(previous.pending))
            previous.pending.clear()
        if self.sub_type == FAILOVER:
            for c in self.consumers:
                c.cnx.send(commands.active_consumer_change(c.consumer_id, c is self.active), consumer_id=c.consumer_id)

    def any_available(self) -> bool:
        return self.active is not None and self.active.available

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        a = self.active
        return a if a is not None and a.available else None

    def sole_consumer(self) -> Consumer | None:
        return self.active

    def active_name(self) -> str | None:
        return self.active.name if self.active is not None else None


class SharedDispatcher(Dispatcher):
    """Round-robin over consumers that have permits."""

    cumulative_ack = False

    def __init__(self, sub: DispatchedSubscription | None, carry: Dispatcher | None) -> None:
        super().__init__(sub, carry)
        self._next = 0

    def any_available(self) -> bool:
        for c in self.consumers:  # noqa: SIM110 (a plain loop: asked once per entry sent)
            if c.available:
                return True
        return False

    def sole_consumer(self) -> Consumer | None:
        if len(self.consumers) != 1:
            return None
        self._next = 0  # where select leaves the rotation with one consumer
        return self.consumers[0]

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        n = len(self.consumers)
        for i in range(n):
            c = self.consumers[(self._next + i) % n]
            if c.available:
                self._next = (self._next + i + 1) % n
                return c
        return None


def make_dispatcher(
    sub_type: int,
    partition_index: int,
    auto_split: bool,
    sub: DispatchedSubscription | None = None,
    carry: Dispatcher | None = None,
) -> Dispatcher:
    if sub_type in (EXCLUSIVE, FAILOVER):
        return SingleActiveConsumerDispatcher(sub, sub_type, partition_index, carry)
    if sub_type == SHARED:
        return SharedDispatcher(sub, carry)
    return KeySharedDispatcher(sub, auto_split, carry)
