# What policies/ reads of the broker and of the topics, subscriptions and consumers it
# bounds, as Protocols that service.BrokerService, the topics of topics/topic.py,
# topics/subscription.py's Subscription and topics/consumer.py's Consumer meet: the policies
# name nothing above their room. Read-only members are properties, so a richer type (a
# dict of PersistentTopic for a Mapping of objects) still fits.
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.policies.dispatch_rate import Rates

if TYPE_CHECKING:
    from letterbox.clock import Clock
    from letterbox.config import BrokerConfig
    from letterbox.storage.store import Store
    from letterbox.topic_name import TopicName


class Configured(Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class NamespaceDocuments(Protocol):
    """The namespace policies (namespace_policies.NamespacePolicyCache), as documents."""

    def document(self, namespace: str) -> dict[str, Any] | None: ...


class Limits(Rates, Protocol):
    """A topic's limits (topic_policies.TopicLimits) that the policies check."""

    @property
    def max_producers(self) -> int | None: ...
    @property
    def max_consumers(self) -> int | None: ...


class Pending(Protocol):
    """A consumer's pending acknowledgements (unacked_limits.PendingAcks), as a count."""

    @property
    def total(self) -> int: ...


class PolicyBroker(Configured, Protocol):
    """The broker as the policies see it: its configuration, metadata store, clock, the
    namespace policies, and which topics exist."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def namespace_policies(self) -> NamespaceDocuments: ...
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
    def limits(self) -> Limits: ...
    @property
    def producers(self) -> Collection[object]: ...
    @property
    def service(self) -> PolicyBroker: ...


class SubscribedTopic(BoundedTopic, Protocol):
    """A persistent topic: its subscriptions by name."""

    @property
    def subscriptions(self) -> Mapping[str, object]: ...


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
    def pending(self) -> Pending: ...
