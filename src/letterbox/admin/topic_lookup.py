# Resolving the topic and subscription an admin request names, with Pulsar's
# errors: 404 for an unknown topic or subscription, 405 where an operation is
# not allowed on a non-persistent or partitioned topic. Operations Pulsar
# applies to every partition of a partitioned topic use partition_targets.
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.admin.http_errors import AdminError
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker.subscription import Subscription
    from letterbox.broker.topic import PersistentTopic


def persistent_topic(admin: AdminContext, name: TopicName, what: str) -> PersistentTopic:
    """A non-partitioned persistent topic (or one partition); `what` names the
    operation in the error of a partitioned or non-persistent topic."""
    if not name.persistent:
        raise AdminError(405, f"{what} on a non-persistent topic is not allowed")
    if admin.service.partitions_of(name) > 0:
        raise AdminError(405, f"{what} on a partitioned topic is not allowed; use one of its partitions")
    if not admin.service.topic_exists(name):
        raise AdminError(404, f"Topic {name} not found")
    return admin.service.persistent_topic(name, create=False)


def partition_targets(admin: AdminContext, name: TopicName, what: str) -> list[PersistentTopic]:
    """The topic itself, or every partition of a partitioned topic."""
    if not name.persistent:
        raise AdminError(405, f"{what} on a non-persistent topic is not allowed")
    n = admin.service.partitions_of(name)
    if n == 0:
        return [persistent_topic(admin, name, what)]
    topics: list[PersistentTopic] = []
    for i in range(n):
        topics.append(admin.service.persistent_topic(name.partition(i), create=True))
    return topics


def subscription(topic: PersistentTopic, name: str) -> Subscription:
    sub = topic.subscriptions.get(name)
    if sub is None or not sub.durable:
        raise AdminError(404, f"Subscription {name} not found on topic {topic.name}")
    return sub
