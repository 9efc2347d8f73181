# The broker as topics/ and the rooms below it see it: a Protocol that
# service.BrokerService meets, so that a topic holds its broker without naming the
# composition root. It adds to what the policies read (policies.bounded.PolicyBroker) the
# namespace policies whole (not only as documents), the loaded topics themselves, the
# registries a topic's work reaches (schemas, compaction, authorization), the broker-wide
# counters, and the broker's background work. The topics it hands out are seen as the rooms
# below see them (moves.move_ends.MovedTopic, compaction.compacted_topic.CompactedTopic),
# so that this module names no topic; what works on the loaded topics themselves sees more
# (topics_broker.TopicsBroker).
from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.policies.bounded import PolicyBroker

if TYPE_CHECKING:
    import asyncio

    from letterbox.broker.compaction.compacted_topic import CompactedTopic
    from letterbox.broker.compaction.compactor import Compactor
    from letterbox.broker.moves.move_ends import DeadLetterCounts, MovedTopic
    from letterbox.broker.policies.namespace_policies import NamespacePolicyCache
    from letterbox.broker.schemas.schema_registry import SchemaRegistry
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.security.authorization import AuthorizationService
    from letterbox.storage.transaction import PendingAppend
    from letterbox.topic_name import TopicName


class TopicBroker(PolicyBroker, Protocol):
    @property
    def namespace_policies(self) -> NamespacePolicyCache: ...
    @property
    def schemas(self) -> SchemaRegistry: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def authorization(self) -> AuthorizationService: ...
    @property
    def stats(self) -> DeadLetterCounts: ...

    def persistent_topic(self, name: TopicName, create: bool = True) -> MovedTopic: ...
    def loaded_persistent_topics(self) -> Sequence[CompactedTopic]: ...
    def detach_consumer(self, consumer: Consumer) -> None: ...
    def count_broker_appends(self, appends: Iterable[PendingAppend]) -> None: ...
    def storage_failed(self, operation: str, exc: BaseException, what: str) -> None: ...
    def redrive_running(self, dlq_name: str) -> bool: ...
    def track(self, task: asyncio.Future[None]) -> None: ...
    def background(self, coro: Coroutine[Any, Any, None]) -> None: ...
