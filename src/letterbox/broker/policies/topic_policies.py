# Namespace policies that bound a topic (pulsar-admin `namespaces set-backlog-quota,
# set-max-producers-per-topic, set-max-consumers-per-topic,
# set-max-unacked-messages-per-consumer / -per-subscription, set-delayed-delivery,
# set-auto-topic-creation`, set-dispatch-rate, set-subscription-dispatch-rate), stored in the namespace's policy document under
# Pulsar's Policies field names, and resolved once per topic into a TopicLimits
# record (PersistentTopic.refresh_policies: at load and whenever the namespace's
# policies change), so the paths that enforce them read attributes only. Topic-level
# policies (stored under TOPIC_POLICIES_KEY + the topic's name, a partitioned topic's
# for all its partitions) win over the namespace's, field by field.
# None in a TopicLimits field means "not set": the broker configuration applies.
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from letterbox.broker.policies.dispatch_rate import SUBSCRIPTION_RATE, TOPIC_RATE, DispatchRate
from letterbox.errors import ConsumerBusy, ProducerBusy

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import BoundedTopic, PolicyBroker
    from letterbox.topic_name import TopicName

TOPIC_POLICIES_KEY = "topic-policies:"  # + topic name: the topic-level policy document
BACKLOG_QUOTA = "backlog_quota_map"  # {"destination_storage": {"limitSize", "limitTime", "policy"}}
MAX_PRODUCERS = "max_producers_per_topic"
MAX_CONSUMERS = "max_consumers_per_topic"
MAX_UNACKED_CONSUMER = "max_unacked_messages_per_consumer"
MAX_UNACKED_SUBSCRIPTION = "max_unacked_messages_per_subscription"
DELAYED_DELIVERY = "delayed_delivery_policies"  # {"active": bool, "tickTime": ms}
AUTO_TOPIC_CREATION = "autoTopicCreationOverride"  # {"allowAutoTopicCreation", "topicType", "defaultNumPartitions"}
DESTINATION_STORAGE = "destination_storage"  # backlogQuotaType: a size limit
MESSAGE_AGE = "message_age"  # backlogQuotaType: an age limit
QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")


@dataclass(frozen=True)
class BacklogQuota:
    limit_size: int  # bytes; -1: no size limit
    limit_time: int  # seconds; -1: no time limit
    policy: str  # one of QUOTA_POLICIES


@dataclass(frozen=True)
class TopicLimits:
    backlog_quota: BacklogQuota | None = None
    max_producers: int | None = None
    max_consumers: int | None = None
    max_unacked_per_consumer: int | None = None
    max_unacked_per_subscription: int | None = None
    delayed_delivery: bool = True
    topic_dispatch_rate: DispatchRate | None = None
    subscription_dispatch_rate: DispatchRate | None = None

    @classmethod
    def from_document(cls, doc: dict[str, Any] | None) -> TopicLimits:
        if not doc:
            return NO_LIMITS
        quota = None
        quotas = doc.get(BACKLOG_QUOTA) or {}
        size, age = quotas.get(DESTINATION_STORAGE), quotas.get(MESSAGE_AGE)
        if size or age:
            first: dict[str, Any] = size or age or {}
            quota = BacklogQuota(int((size or {}).get("limitSize", -1)),
                                 int((age or size or {}).get("limitTime", -1)),
                                 str(first.get("policy", "producer_request_hold")))
        dd = doc.get(DELAYED_DELIVERY) or {}
        return cls(
            backlog_quota=quota,
            max_producers=doc.get(MAX_PRODUCERS),
            max_consumers=doc.get(MAX_CONSUMERS),
            max_unacked_per_consumer=doc.get(MAX_UNACKED_CONSUMER),
            max_unacked_per_subscription=doc.get(MAX_UNACKED_SUBSCRIPTION),
            delayed_delivery=bool(dd.get("active", True)),
            topic_dispatch_rate=DispatchRate.from_json(doc.get(TOPIC_RATE)),
            subscription_dispatch_rate=DispatchRate.from_json(doc.get(SUBSCRIPTION_RATE)),
        )


NO_LIMITS = TopicLimits()


def topic_document(service: PolicyBroker, name: TopicName) -> dict[str, Any] | None:
    """The topic-level policies of `name` (of its partitioned topic for a partition)."""
    raw = service.store.get_metadata(TOPIC_POLICIES_KEY + str(name.partitioned_parent))
    return json.loads(raw) if raw else None


def effective_document(service: PolicyBroker, name: TopicName) -> dict[str, Any]:
    """The namespace's policies with the topic's on top: a policy set on the topic wins."""
    doc = dict(service.namespace_policies.document(name.namespace_name) or {})
    doc.update(topic_document(service, name) or {})
    return doc


async def update_topic_policy(service: PolicyBroker, name: TopicName, key: str, value: Any) -> None:
    """Set (None: remove) one topic-level policy, durably, then apply it to the loaded topic
    or partitions."""
    doc = topic_document(service, name) or {}
    if value is None:
        doc.pop(key, None)
    else:
        doc[key] = value
    await service.store.put_metadata(TOPIC_POLICIES_KEY + str(name), json.dumps(doc) if doc else None)
    parts = [name.partition(i) for i in range(service.partitions_of(name))] or [name]
    for part in parts:
        topic = service.topics.get(str(part))
        refresh = getattr(topic, "refresh_policies", None)
        if refresh is not None:
            refresh()


async def forget_topic_policies(service: PolicyBroker, name: TopicName) -> None:
    if service.store.get_metadata(TOPIC_POLICIES_KEY + str(name)) is not None:
        await service.store.put_metadata(TOPIC_POLICIES_KEY + str(name), None)


def limits_for(service: PolicyBroker, name: TopicName) -> TopicLimits:
    return TopicLimits.from_document(effective_document(service, name))


def check_new_producer(topic: BoundedTopic) -> None:
    """maxProducersPerTopic (0 or unset: no limit), as Pulsar: ProducerBusy."""
    limit = topic.limits.max_producers
    if limit and len(topic.producers) >= limit:
        raise ProducerBusy(f"Topic {topic.name} reached max producers limit ({limit})")


def check_new_consumer(topic: BoundedTopic) -> None:
    """maxConsumersPerTopic (0 or unset: no limit), as Pulsar: ConsumerBusy."""
    limit = topic.limits.max_consumers
    if not limit:
        return
    subs = getattr(topic, "subscriptions", {})
    if sum(len(s.consumers) for s in subs.values()) >= limit:
        raise ConsumerBusy(f"Topic {topic.name} reached max consumers limit ({limit})")


def auto_creation_allowed(service: PolicyBroker, name: TopicName) -> bool:
    """The namespace's autoTopicCreation override, else the broker's auto_topic_creation."""
    doc = service.namespace_policies.document(name.namespace_name) or {}
    override = doc.get(AUTO_TOPIC_CREATION)
    if override is not None:
        return bool(override.get("allowAutoTopicCreation"))
    return service.config.auto_topic_creation
