# Backlog quota (pulsar-admin `namespaces set-backlog-quota`), enforced as Pulsar
# does: the backlog of a topic is the backlog of its slowest durable
# subscription, in bytes (estimated from the topic's average message size) and
# in time (age of that subscription's oldest unacknowledged message). Once it
# passes the quota:
#   producer_exception        the topic's producers are closed (each close leaves after
#                             the receipts of its SENDs already being stored); their
#                             reconnect is refused with ProducerBlockedQuotaExceededException,
#                             on which the official clients fail their pending sends
#                             with that error (new producers get it too);
#   producer_request_hold     the same with ProducerBlockedQuotaExceededError, which
#                             the clients retry: sends wait until consumers catch up;
#   consumer_backlog_eviction the oldest messages of the subscriptions over the
#                             quota are skipped (acknowledged) until it holds again.
# The check runs after each durable append of a topic that has a quota (a confirm
# listener added only then) and when a producer is created; topics without a
# quota pay nothing. The topic is seen through QuotaTopic (topic.PersistentTopic meets it),
# so that a topic can attach its check.
from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sized
from typing import TYPE_CHECKING, Protocol, cast

from letterbox.errors import LetterboxError, ServerError

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import PolicyBroker
    from letterbox.broker.policies.topic_policies import TopicLimits
    from letterbox.broker.topics.subscription import Subscription
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.position import Position
    from letterbox.topic_name import TopicName


class LimitedTopic(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def limits(self) -> TopicLimits: ...


class QuotaTopic(LimitedTopic, Protocol):
    quota_listener: Callable[[Position], None] | None  # the append check, while a quota is set

    @property
    def ledger(self) -> ManagedLedger: ...
    @property
    def service(self) -> PolicyBroker: ...
    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...
    @property
    def producers(self) -> Sized: ...

    def close_producers(self) -> None: ...


_evicting: dict[Subscription, asyncio.Future[None]] = {}  # evictions under way


def attach(topic: QuotaTopic) -> None:
    """Add or remove the topic's append check as its quota is set or removed."""
    listener = topic.quota_listener
    if topic.limits.backlog_quota is not None and listener is None:
        def on_confirmed(_pos: Position) -> None:
            # off the commit's hand-back; a close still waits for receipts (ServerCnx.close_producer)
            asyncio.get_running_loop().call_soon(enforce, topic)

        topic.quota_listener = on_confirmed
        topic.ledger.add_confirm_listener(on_confirmed)
    elif topic.limits.backlog_quota is None and listener is not None:
        topic.ledger.remove_confirm_listener(listener)
        topic.quota_listener = None


def _durable(topic: QuotaTopic) -> list[Subscription]:
    return [s for s in topic.subscriptions.values() if s.durable]


def backlog_bytes(topic: QuotaTopic, sub: Subscription) -> int:
    ledger = topic.ledger
    stored = ledger.count_messages(ledger.first_position.entry_id - 1)
    if stored <= 0:
        return 0
    return sub.backlog() * ledger.size_bytes() // stored


def backlog_age_seconds(topic: QuotaTopic, sub: Subscription) -> float:
    if sub.backlog() <= 0:
        return 0.0
    entry = topic.ledger.read_entry(max(sub.cursor.mark_delete.entry_id + 1, topic.ledger.first_position.entry_id))
    if entry is None:
        return 0.0
    return max(0.0, (topic.service.clock.now_ms() - entry.publish_time) / 1000)


def over_quota(topic: QuotaTopic, sub: Subscription) -> bool:
    quota = topic.limits.backlog_quota
    if quota is None:
        return False
    if quota.limit_size >= 0 and backlog_bytes(topic, sub) > quota.limit_size:
        return True
    return quota.limit_time >= 0 and backlog_age_seconds(topic, sub) > quota.limit_time


def exceeded(topic: QuotaTopic) -> bool:
    return any(over_quota(topic, s) for s in _durable(topic))


def check_producer(topic: LimitedTopic) -> None:
    """At producer creation: refused while the backlog of a persistent topic is over a
    producer_* quota."""
    quota = topic.limits.backlog_quota
    if not quota or quota.policy == "consumer_backlog_eviction":
        return
    if topic.name.persistent and exceeded(cast(QuotaTopic, topic)):  # a persistent topic: a QuotaTopic
        if quota.policy == "producer_exception":
            raise LetterboxError(f"Cannot create producer on topic with backlog quota exceeded: {topic.name}",
                                 ServerError.ProducerBlockedQuotaExceededException)
        raise LetterboxError(f"Producer is blocked on topic {topic.name}: its backlog quota is exceeded; "
                             "it is retried until consumers catch up",
                             ServerError.ProducerBlockedQuotaExceededError)


def enforce(topic: QuotaTopic) -> None:
    quota = topic.limits.backlog_quota
    if quota is None:
        return
    if quota.policy == "consumer_backlog_eviction":
        for sub in _durable(topic):
            if over_quota(topic, sub) and sub not in _evicting:
                _evicting[sub] = asyncio.ensure_future(_evict(topic, sub))
        return
    if topic.producers and exceeded(topic):
        topic.close_producers()


async def _evict(topic: QuotaTopic, sub: Subscription) -> None:
    """Skip the subscription's oldest messages until it is within the quota again."""
    try:
        await _skip_excess(topic, sub)
    finally:
        _evicting.pop(sub, None)


async def _skip_excess(topic: QuotaTopic, sub: Subscription) -> None:
    quota = topic.limits.backlog_quota
    if quota is None:
        return
    backlog = sub.backlog()
    if backlog <= 0:
        return
    excess = 0
    if quota.limit_size >= 0:
        size = backlog_bytes(topic, sub)
        per_message = max(1, size // backlog)
        excess = max(excess, -(-(size - quota.limit_size) // per_message))
    if quota.limit_time >= 0 and backlog_age_seconds(topic, sub) > quota.limit_time:
        cutoff = topic.service.clock.now_ms() - quota.limit_time * 1000
        keep_from = topic.ledger.find_entry_by_publish_time(cutoff).entry_id
        excess = max(excess, backlog - topic.ledger.count_messages(keep_from - 1))
    if excess > 0:
        from letterbox.broker.topics import subscription_admin

        await subscription_admin.skip(sub, min(excess, backlog))
