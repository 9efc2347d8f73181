# A subscription, its topic, cursor, dispatcher and consumers as redelivery/ sees them:
# Protocols that topics.subscription.Subscription (with its cursor and dispatcher),
# topics.topic.PersistentTopic and topics.consumer.Consumer meet, so that redelivery/
# names nothing above it. They extend what a move sees (moves.move_ends): a redelivery
# that ends in a dead letter hands the same subscription on to the move.
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.moves.move_ends import (
    AttemptTracker,
    MoveCursor,
    MovedSubscription,
    MovedTopic,
    PoisonRecorder,
)

if TYPE_CHECKING:
    import asyncio

    from letterbox.broker.policies.unacked_limits import PendingAcks
    from letterbox.failure import FailurePolicy, TopicRole


class TrackedCursor(MoveCursor, Protocol):
    def increment_redelivery(self, entry_ids: list[int]) -> None: ...
    def set_due(self, entry_id: int, due_ms: int | None) -> None: ...
    def add_attempts(self, rows: Iterable[tuple[int, tuple[Any, ...]]], limit: int) -> None: ...
    def write_now(self) -> asyncio.Future[None] | None: ...
    def write_by_caller(self) -> None: ...
    async def flush(self) -> None: ...


class Dispatch(Protocol):
    """A subscription's dispatcher: entries to hold back, and a read to schedule."""

    def park(self, entry_ids: list[int]) -> None: ...
    def schedule(self) -> None: ...


class Peer(Protocol):
    @property
    def remote(self) -> str: ...


class TrackedConsumer(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def pending(self) -> PendingAcks: ...
    @property
    def cnx(self) -> Peer: ...


class Tracker(AttemptTracker, Protocol):
    """The subscription's redelivery tracker (redelivery_tracker.RedeliveryTracker): entries
    held back until a time, and the reason of a message's latest failure."""

    def delay(self, entry_id: int, deliver_at_ms: int) -> None: ...
    def last_failure_reason(self, entry_id: int) -> str | None: ...


class TrackedTopic(MovedTopic, Protocol):
    @property
    def subscriptions(self) -> Mapping[str, TrackedSubscription]: ...


class TrackedSubscription(MovedSubscription, Protocol):
    @property
    def topic(self) -> TrackedTopic: ...
    @property
    def cursor(self) -> TrackedCursor: ...
    @property
    def tracker(self) -> Tracker: ...
    @property
    def quarantine(self) -> PoisonRecorder: ...
    @property
    def redelivery(self) -> Tracker: ...
    @property
    def dispatcher(self) -> Dispatch: ...
    @property
    def consumers(self) -> Sequence[TrackedConsumer]: ...
    @property
    def durable(self) -> bool: ...
    @property
    def sub_type(self) -> int | None: ...
    @property
    def policy(self) -> FailurePolicy: ...
    @property
    def topic_role(self) -> TopicRole: ...
