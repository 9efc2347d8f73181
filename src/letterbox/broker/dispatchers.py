# Consumer selection per subscription type (Pulsar's Dispatcher
# implementations). A dispatcher only *chooses*: the subscription owns the
# read position, the replay queue and the sending. `select` returns the
# consumer for an entry, or None when the entry cannot go anywhere now; for
# Key_Shared, `defer` says whether a None means "park this entry and go on"
# (another key may still be deliverable) rather than "stop reading".
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.broker.key_shared import HashRangeSelector, sticky_key_hash
from letterbox.errors import ConsumerBusy
from letterbox.protocol import commands, parse_entry_metadata

if TYPE_CHECKING:
    from letterbox.broker.consumer import Consumer
    from letterbox.storage.entry import Entry

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = 0, 1, 2, 3


class Dispatcher:
    defers = False

    def __init__(self) -> None:
        self.consumers: list[Consumer] = []

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def any_available(self) -> bool:
        return any(c.available for c in self.consumers)

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        raise NotImplementedError


class SingleActiveConsumerDispatcher(Dispatcher):
    """Exclusive and Failover: everything goes to the one active consumer."""

    def __init__(self, sub_type: int, partition_index: int) -> None:
        super().__init__()
        self.sub_type = sub_type
        self.partition_index = partition_index
        self.active: Consumer | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        if self.consumers and self.sub_type == EXCLUSIVE:
            raise ConsumerBusy("Exclusive consumer is already connected")
        super().add_consumer(consumer)

    def pick_active(self) -> tuple[Consumer | None, Consumer | None]:
        """Recompute the active consumer; returns (previous, new)."""
        previous = self.active
        if not self.consumers:
            self.active = None
        else:
            ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name, c.consumer_id))
            top = [c for c in ordered if c.priority_level == ordered[0].priority_level]
            index = self.partition_index % len(top) if self.partition_index >= 0 else 0
            self.active = top[index]
        return previous, self.active

    def notify_active(self) -> None:
        if self.sub_type != FAILOVER:
            return
        for c in self.consumers:
            c.cnx.write(commands.active_consumer_change(c.consumer_id, c is self.active))

    def any_available(self) -> bool:
        return self.active is not None and self.active.available

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        a = self.active
        return a if a is not None and a.available else None


class SharedDispatcher(Dispatcher):
    """Round-robin over consumers that have permits."""

    def __init__(self) -> None:
        super().__init__()
        self._next = 0

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        n = len(self.consumers)
        for i in range(n):
            c = self.consumers[(self._next + i) % n]
            if c.available:
                self._next = (self._next + i + 1) % n
                return c
        return None


class KeySharedDispatcher(Dispatcher):
    defers = True

    def __init__(self, auto_split: bool) -> None:
        super().__init__()
        self.selector: HashRangeSelector[Consumer] = HashRangeSelector(auto_split)
        self._hash_cache: dict[int, int] = {}

    def add_consumer(self, consumer: Consumer) -> None:
        self.selector.add(consumer, consumer.sticky_ranges)
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self.selector.remove(consumer)
        super().remove_consumer(consumer)

    def key_hash(self, entry: Entry) -> int:
        eid = entry.position.entry_id
        h = self._hash_cache.get(eid)
        if h is None:
            meta = parse_entry_metadata(entry.data)
            if meta.HasField("ordering_key"):
                key = meta.ordering_key
            elif meta.HasField("partition_key"):
                key = meta.partition_key.encode()
            else:
                key = b""
            h = sticky_key_hash(key)
            if len(self._hash_cache) > 100_000:
                self._hash_cache.clear()
            self._hash_cache[eid] = h
        return h

    def cached_hash(self, entry_id: int) -> int | None:
        return self._hash_cache.get(entry_id)

    def owner_available(self, hash_value: int) -> bool:
        c = self.selector.select(hash_value)
        return c is not None and c.available

    def owner(self, entry: Entry) -> Consumer | None:
        return self.selector.select(self.key_hash(entry))

    def forget(self, entry_id: int) -> None:
        self._hash_cache.pop(entry_id, None)

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        c = self.owner(entry)
        return c if c is not None and c.available else None


def make_dispatcher(sub_type: int, partition_index: int, auto_split: bool) -> Dispatcher:
    if sub_type in (EXCLUSIVE, FAILOVER):
        return SingleActiveConsumerDispatcher(sub_type, partition_index)
    if sub_type == SHARED:
        return SharedDispatcher()
    return KeySharedDispatcher(auto_split)
