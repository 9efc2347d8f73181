# Pulsar's maxTopicsPerNamespace and maxSubscriptionsPerTopic (0: no limit),
# checked where a client or an operator asks for something new: a producer
# or consumer auto-creating a topic, a lookup auto-partitioning one, an admin
# create, a SUBSCRIBE or an admin create of a new subscription. Topics and
# subscriptions the broker makes for itself (dead letter and retry targets of
# a move, its internal dead-letter bookkeeping subscription) are not refused:
# refusing them would strand a message mid-move. A partitioned topic counts
# as its number of partitions, as in Pulsar.
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.errors import NotAllowed
from letterbox.failure import HANDLED_SUBSCRIPTION

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import PolicyBroker, SubscribedTopic
    from letterbox.topic_name import TopicName


def check_new_topic(service: PolicyBroker, name: TopicName, new: int = 1) -> None:
    """Refuse creating `new` topics in the namespace of `name` beyond maxTopicsPerNamespace."""
    limit = service.config.max_topics_per_namespace
    if limit <= 0 or new <= 0 or service.topic_exists(name):
        return
    parent = name.partitioned_parent
    if parent != name and 0 <= name.partition_index < service.partitions_of(parent):
        return  # a partition of a partitioned topic already counted
    namespace = name.namespace_name
    count = len(service.list_topics(namespace))
    if count + new > limit:
        raise NotAllowed(
            f"Exceed maximum number of topics in namespace {namespace}: it has {count}, "
            f"creating {name} would make {count + new} (maxTopicsPerNamespace = {limit})"
        )


def check_new_subscription(topic: SubscribedTopic, name: str) -> None:
    """Refuse a new subscription on `topic` beyond maxSubscriptionsPerTopic."""
    limit = topic.service.config.max_subscriptions_per_topic
    if limit <= 0 or name in topic.subscriptions:
        return
    count = sum(1 for s in topic.subscriptions if s != HANDLED_SUBSCRIPTION)
    if count >= limit:
        raise NotAllowed(
            f"Exceed the maximum number of subscriptions of the topic {topic.name}: it has {count} "
            f"(maxSubscriptionsPerTopic = {limit}); {name!r} was not created"
        )
