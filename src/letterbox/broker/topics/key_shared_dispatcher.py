# Key_Shared dispatching (Pulsar's PersistentStickyKeyDispatcherMultipleConsumers):
# an entry goes to the consumer owning its sticky key's hash (key_shared.py).
# When the owner cannot take it now, the entry is parked in the replay queue
# and reading goes on with other keys; new entries of a key that has parked
# entries wait behind them, so each key's order is kept.
# Fencing: a consumer that joins a subscription with consumers may take over
# hash ranges whose earlier messages are still unacked on another consumer. It
# gets a fence, the read position at its arrival: it receives no entry at or
# after the fence until everything before the fence is acknowledged.
# Invariants: a fence exists only for a connected consumer; the hash cache is
# bounded (cleared past 100,000 entries).
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from letterbox.broker.topics.dispatcher import Dispatcher
from letterbox.broker.topics.key_shared import HashRangeSelector, sticky_key_hash
from letterbox.protocol import parse_entry_metadata
from letterbox.protocol.text_fields import as_key_bytes

if TYPE_CHECKING:
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.dispatched import DispatchedSubscription
    from letterbox.storage.entry import Entry

MAX_HASH_CACHE = 100_000


class KeySharedDispatcher(Dispatcher):
    defers = True
    cumulative_ack = False

    def __init__(self, sub: DispatchedSubscription | None, auto_split: bool, carry: Dispatcher | None) -> None:
        super().__init__(sub, carry)
        self.selector: HashRangeSelector[Consumer] = HashRangeSelector(auto_split)
        self._hash_cache: dict[int, int] = {}
        self._fences: dict[Consumer, int] = {}

    # --- consumers -----------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.selector.add(consumer, consumer.sticky_ranges)
        if self.consumers:
            self._fences[consumer] = self.read_position
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self.selector.remove(consumer)
        self._fences.pop(consumer, None)
        super().remove_consumer(consumer)

    def on_acked(self) -> None:
        if self._fences:
            self.schedule()

    # --- keys ----------------------------------------------------------------
    def key_hash(self, entry: Entry) -> int:
        eid = entry.position.entry_id
        h = self._hash_cache.get(eid)
        if h is None:
            meta = parse_entry_metadata(entry.data)
            if meta.HasField("ordering_key"):
                key = meta.ordering_key
            elif meta.HasField("partition_key"):
                key = as_key_bytes(meta.partition_key)  # the bytes sent, UTF-8 or not
            else:
                key = b""
            h = sticky_key_hash(key)
            if len(self._hash_cache) > MAX_HASH_CACHE:
                self._hash_cache.clear()
            self._hash_cache[eid] = h
        return h

    def owner(self, entry: Entry) -> Consumer | None:
        return self.selector.select(self.key_hash(entry))

    def select(self, entry: Entry, replay: bool) -> Consumer | None:
        c = self.owner(entry)
        return c if c is not None and c.available else None

    # --- read loop hooks -------------------------------------------------------
    def _new_round(self) -> Any:
        """The hashes of parked entries: new entries of these keys wait behind them."""
        if not self._replay or self.sub is None:
            return set()
        ledger = self.sub.topic.ledger
        hashes: set[int] = set()
        for eid in self._replay:
            h = self._hash_cache.get(eid)
            if h is None:
                entry = ledger.read_entry(eid)
                if entry is None:
                    continue
                h = self.key_hash(entry)
            hashes.add(h)
        return hashes

    def _target(self, entry: Entry, plan: Any) -> Consumer | None:
        parked: set[int] = plan
        return self._owner_now(entry, parked)

    def _defer(self, entry: Entry, plan: Any) -> None:
        parked: set[int] = plan
        parked.add(self.key_hash(entry))
        self.park([entry.position.entry_id])

    def _blocked_unread(self, entry_id: int, blocked: set[int]) -> bool:
        cached = self._hash_cache.get(entry_id)
        if cached is None:
            return False
        c = self.selector.select(cached)
        if cached in blocked or c is None or not c.available:
            blocked.add(cached)
            return True
        return False

    def _replay_target(self, entry: Entry, blocked: set[int]) -> Consumer | None:
        h = self.key_hash(entry)
        target = None if h in blocked else self._owner_now(entry, None)
        if target is None:
            blocked.add(h)
        return target

    def _owner_now(self, entry: Entry, parked: set[int] | None) -> Consumer | None:
        """The owner of the entry's key if it may take the entry now; `parked` (new
        entries only) holds the hashes of replay entries, which must go first."""
        owner = self.owner(entry)
        if owner is None or not owner.available:
            return None
        if parked and self.key_hash(entry) in parked:
            return None
        fence = self._fences.get(owner)
        if fence is not None:
            assert self.sub is not None
            if self.sub.cursor.mark_delete.entry_id >= fence - 1:
                del self._fences[owner]
            elif entry.position.entry_id >= fence:
                return None
        return owner
