# The two ends of a move and the broker that holds them, as moves/ sees them: Protocols
# that service.BrokerService, topics.topic.PersistentTopic, topics.subscription.Subscription
# (with its cursor, redelivery tracker and key quarantine) meet, so that moves/ names
# nothing above it. A move reads the source subscription's cursor and attempt log, appends
# to a target topic's ledger in one storage transaction with the source's acknowledgement,
# then settles the source subscription.
from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.policies.bounded import PolicyBroker

if TYPE_CHECKING:
    import asyncio

    from letterbox.broker.schemas.schema_registry import SchemaRegistry
    from letterbox.failure.attempts import Attempt
    from letterbox.security.authorization import AuthorizationService
    from letterbox.storage.delivery_state import DeliveryState
    from letterbox.storage.entry import Entry
    from letterbox.storage.managed_cursor import ManagedCursor
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.position import Position
    from letterbox.storage.transaction import PendingAppend, Transaction
    from letterbox.topic_name import TopicName


class DeadLetterCounts(Protocol):
    def dead_lettered(self, reason: str, messages: int, topic: str = "", subscription: str = "") -> None: ...


class MovesBroker(PolicyBroker, Protocol):
    @property
    def schemas(self) -> SchemaRegistry: ...
    @property
    def authorization(self) -> AuthorizationService: ...
    @property
    def stats(self) -> DeadLetterCounts: ...

    def persistent_topic(self, name: TopicName, create: bool = True) -> MovedTopic: ...
    def count_broker_appends(self, appends: Iterable[PendingAppend]) -> None: ...
    def storage_failed(self, operation: str, exc: BaseException, what: str) -> None: ...
    def redrive_running(self, dlq_name: str) -> bool: ...  # a redrive of that dead letter topic runs now
    def track(self, task: asyncio.Future[None]) -> None: ...
    def background(self, coro: Coroutine[Any, Any, None]) -> None: ...


class MoveCursor(Protocol):
    """A subscription's cursor, as a move reads it (a durable one is a ManagedCursor)."""

    @property
    def deliveries(self) -> DeliveryState: ...
    @property
    def mark_delete(self) -> Position: ...

    def is_acked(self, entry_id: int) -> bool: ...
    def acked_indexes(self, entry_id: int) -> frozenset[int]: ...
    def redelivery_count(self, entry_id: int, batch_index: int | None = None) -> int: ...


class AttemptLog(Protocol):
    """The delivery attempt log a dead letter carries (redelivery.delivery_attempts)."""

    def final_rows(self, entry_id: int, reason: str) -> tuple[tuple[Any, ...], ...] | None: ...
    def final_attempts(self, entry_id: int, reason: str, description: str | None, now: int) -> list[Attempt]: ...


class AttemptTracker(Protocol):
    @property
    def log(self) -> AttemptLog: ...


class PoisonRecorder(Protocol):
    """The key quarantine of a subscription: a dead letter may poison its key."""

    def record_poison(self, txn: Transaction, cursor: ManagedCursor, reason: str, dlq: TopicName,
                      moved: Iterable[tuple[Entry, int]]) -> None: ...


class MovedSubscription(Protocol):
    """The source end of a move: a subscription whose entries leave it."""

    @property
    def name(self) -> str: ...
    @property
    def topic(self) -> MovedTopic: ...
    @property
    def cursor(self) -> MoveCursor: ...
    @property
    def tracker(self) -> AttemptTracker: ...
    @property
    def quarantine(self) -> PoisonRecorder: ...

    def settle_acknowledged(self, entry_id: int) -> None: ...


class MovedTopic(Protocol):
    """A persistent topic at either end of a move."""

    @property
    def name(self) -> TopicName: ...
    @property
    def ledger(self) -> ManagedLedger: ...
    @property
    def service(self) -> MovesBroker: ...
    @property
    def terminated(self) -> Position | None: ...
    @property
    def subscriptions(self) -> Mapping[str, MovedSubscription]: ...

    def subscription_for(
        self, name: str, durable: bool, initial_position: str, start_entry_id: int | None
    ) -> MovedSubscription: ...
