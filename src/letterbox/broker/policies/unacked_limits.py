# Limits on unacknowledged messages (Pulsar's maxUnackedMessagesPerConsumer and
# maxUnackedMessagesPerSubscription), applied as Pulsar applies them: to
# Shared and Key_Shared subscriptions only. A consumer holding `limit`
# unacked messages is blocked (no more dispatch to it, its stats say
# blockedConsumerOnUnackedMsgs) until acks bring it down to half the limit; a
# subscription whose consumers together hold its limit stops dispatching to
# all of them until the total is down to half.
#
# PendingAcks is a consumer's pending-ack map (entry id -> messages in that
# entry) keeping a running total, so checking a limit costs O(1) per consumer
# and the subscription code that fills and drains the map is unchanged.
# Invariant: `total` is the sum of the values; every change goes through the
# owner's `on_change(delta)`, except additions that unblocked_room says change no
# flag (add_quiet / add_run: a dispatch round booking entries for one consumer).
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import UnackedConsumer, UnackedSubscription

SHARED, KEY_SHARED = 1, 3
NO_LIMIT = 1 << 62
_MISSING = object()


class PendingAcks(dict[int, int]):
    __slots__ = ("_on_change", "total")

    def __init__(self, on_change: Callable[[int], None]) -> None:
        super().__init__()
        self.total = 0
        self._on_change = on_change

    def __setitem__(self, key: int, value: int) -> None:
        delta = value - super().get(key, 0)
        super().__setitem__(key, value)
        self._changed(delta)

    def __delitem__(self, key: int) -> None:
        value = super().pop(key)
        self._changed(-value)

    def pop(self, key: int, default: object = _MISSING) -> object:  # type: ignore[override]
        if key in self:
            value = super().pop(key)
            self._changed(-value)
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def add_quiet(self, key: int, value: int) -> None:
        """Add a new key without notifying the owner (the caller knows the new total
        changes nothing: unblocked_room); an existing key is set as usual."""
        if key in self:
            self[key] = value
            return
        dict.__setitem__(self, key, value)
        self.total += value

    def add_run(self, keys: list[int], values: list[int], total: int) -> None:
        """add_quiet for many new keys at once (`total` = sum of values); keys already
        present are set one by one as add_quiet does."""
        if not self.keys().isdisjoint(keys):
            for key, value in zip(keys, values, strict=True):
                self.add_quiet(key, value)
            return
        dict.update(self, zip(keys, values, strict=True))
        self.total += total

    def discard_many(self, keys: list[int]) -> list[int]:
        """Remove the keys present (one owner notification for all); return the absent ones."""
        absent: list[int] = []
        removed = 0
        pop = super().pop
        for key in keys:
            value = pop(key, None)
            if value is None:
                absent.append(key)
            else:
                removed += value
        self._changed(-removed)
        return absent

    def clear(self) -> None:
        total = self.total
        super().clear()
        self._changed(-total)

    def _changed(self, delta: int) -> None:
        if delta:
            self.total += delta
            self._on_change(delta)


def limited(consumer: UnackedConsumer) -> bool:
    return consumer.sub_type in (SHARED, KEY_SHARED)


def _limits(consumer: UnackedConsumer, sub: UnackedSubscription) -> tuple[int, int]:
    """(per consumer, per subscription) limits; 0 or less: none."""
    cfg = consumer.cnx.service.config
    limits = getattr(sub.topic, "limits", None)  # the namespace's policies win over the broker's
    per_consumer = cfg.max_unacked_messages_per_consumer
    per_sub = cfg.max_unacked_messages_per_subscription
    if limits is not None:
        if limits.max_unacked_per_consumer is not None:
            per_consumer = limits.max_unacked_per_consumer
        if limits.max_unacked_per_subscription is not None:
            per_sub = limits.max_unacked_per_subscription
    return per_consumer, per_sub


def unblocked_room(consumer: UnackedConsumer) -> int:
    """How many more unacked messages `consumer` can be given before on_pending_change
    would block it or its subscription: booking fewer than this changes no flag, so it
    needs no notification (PendingAcks.add_quiet). NO_LIMIT when no limit applies."""
    sub = consumer.subscription
    if sub is None or not limited(consumer):
        return NO_LIMIT
    per_consumer, per_sub = _limits(consumer, sub)
    room = NO_LIMIT
    if per_consumer > 0:
        room = per_consumer - consumer.pending.total
    if per_sub > 0 and not sub.blocked_on_unacked:
        room = min(room, per_sub - subscription_unacked(consumer))
    return room


def on_pending_change(consumer: UnackedConsumer, delta: int) -> None:
    """Block or unblock a consumer (and its subscription) after its unacked count moved."""
    sub = consumer.subscription
    if sub is None or not limited(consumer):
        return
    per_consumer, per_sub = _limits(consumer, sub)
    if delta > 0:
        if per_consumer > 0 and consumer.pending.total >= per_consumer:
            consumer.blocked_on_unacked = True
        if per_sub > 0 and not sub.blocked_on_unacked and subscription_unacked(consumer) >= per_sub:
            sub.blocked_on_unacked = True
        return
    resumed = False
    if consumer.blocked_on_unacked and consumer.pending.total <= per_consumer // 2:
        consumer.blocked_on_unacked = False
        resumed = True
    if sub.blocked_on_unacked and subscription_unacked(consumer) <= per_sub // 2:
        sub.blocked_on_unacked = False
        resumed = True
    if resumed:
        sub.schedule_dispatch()


def subscription_unacked(consumer: UnackedConsumer) -> int:
    sub = consumer.subscription
    if sub is None:
        return 0
    consumers = sub.consumers
    if len(consumers) == 1:
        return consumers[0].pending.total
    return sum(c.pending.total for c in consumers)
