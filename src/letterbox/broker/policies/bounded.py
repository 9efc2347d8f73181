# What policies/ reads of the broker and of the topics, subscriptions and consumers it
# bounds, as Protocols that service.BrokerService, the topics of topics/topic.py,
# topics/subscription.py's Subscription and topics/consumer.py's Consumer meet: the policies
# name nothing above their room. Read-only members are properties, so a richer type (a
# dict of PersistentTopic for a Mapping of objects) still fits.
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from letterbox.broker.policies.namespace_policies import NamespacePolicyCache
    from letterbox.broker.policies.topic_policies import TopicLimits
    from letterbox.broker.policies.unacked_limits import PendingAcks
    from letterbox.clock import Clock
    from letterbox.config import BrokerConfig
    from letterbox.storage.store import Store
    from letterbox.topic_name import TopicName


class Configured(Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class PolicyBroker(Configured, Protocol):
    """The broker as the policies see it: its configuration, metadata store, clock, the
    namespace policies, and which topics exist."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def namespace_policies(self) -> NamespacePolicyCache: ...
    @property
    def topics(self) -> Mapping[str, object]: ...  # the loaded topics by name

    def partitions_of(self, name: TopicName, create: bool = False) -> int: ...
    def topic_exists(self, name: TopicName) -> bool: ...
    def list_topics(self, namespace: str) -> list[str]: ...
    def apply_namespace_policies(self, namespace: str) -> None: ...


class BoundedTopic(Protocol):
    """A topic, persistent or not, with the limits its policies set."""

    @property
    def name(self) -> TopicName: ...
    @property
    def limits(self) -> TopicLimits: ...
    @property
    def producers(self) -> Collection[object]: ...
    @property
    def service(self) -> PolicyBroker: ...


class SubscribedTopic(BoundedTopic, Protocol):
    """A persistent topic: its subscriptions by name."""

    @property
    def subscriptions(self) -> Mapping[str, object]: ...


class RatedSubscription(Protocol):
    """A subscription whose dispatch the dispatch rates bound."""

    @property
    def topic(self) -> BoundedTopic: ...


class UnackedSubscription(Protocol):
    """A subscription as the unacked-message limits block and unblock it."""

    blocked_on_unacked: bool

    @property
    def topic(self) -> object: ...
    @property
    def consumers(self) -> Sequence[UnackedConsumer]: ...

    def schedule_dispatch(self) -> None: ...


class ConsumerLink(Protocol):
    """A consumer's connection, for the broker's configuration."""

    @property
    def service(self) -> Configured: ...


class UnackedConsumer(Protocol):
    """A consumer as the unacked-message limits count, block and unblock it."""

    blocked_on_unacked: bool

    @property
    def sub_type(self) -> int: ...
    @property
    def cnx(self) -> ConsumerLink: ...
    @property
    def subscription(self) -> UnackedSubscription | None: ...
    @property
    def pending(self) -> PendingAcks: ...
