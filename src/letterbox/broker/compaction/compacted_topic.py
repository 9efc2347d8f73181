# A topic, its subscriptions and its broker as compaction sees them: Protocols that
# topics.topic.PersistentTopic, topics.subscription.Subscription (with its cursor) and
# service.BrokerService meet, so that compaction/ names nothing above it. A compaction run
# reads the topic's ledger and moves its own durable subscription's cursor; compacted reads
# look a subscription's topic up in the broker's compactor.
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from letterbox.broker.policies.bounded import PolicyBroker

if TYPE_CHECKING:
    from letterbox.storage.compaction import CompactedViews
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.position import Position
    from letterbox.topic_name import TopicName


class CompactedViewsHolder(Protocol):
    """The broker's compactor (compactor.Compactor), for its compacted views."""

    @property
    def views(self) -> CompactedViews: ...


class CompactionBroker(PolicyBroker, Protocol):
    @property
    def compactor(self) -> CompactedViewsHolder: ...

    def loaded_persistent_topics(self) -> Sequence[CompactedTopic]: ...


class CompactedCursor(Protocol):
    @property
    def mark_delete(self) -> Position: ...

    def ack_cumulative(self, entry_id: int) -> None: ...
    def acked_indexes(self, entry_id: int) -> frozenset[int]: ...


class Subscription(Protocol):
    """A subscription of a compacted topic: the compaction run's own, or a read_compacted
    reader's."""

    @property
    def topic(self) -> CompactedTopic: ...
    @property
    def cursor(self) -> CompactedCursor: ...


class CompactedTopic(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def ledger(self) -> ManagedLedger: ...
    @property
    def service(self) -> CompactionBroker: ...

    def subscription_for(
        self, name: str, durable: bool, initial_position: str, start_entry_id: int | None
    ) -> Subscription: ...
    def on_cursor_moved(self) -> None: ...
