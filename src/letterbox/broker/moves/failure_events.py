# The broker's failure events publisher: publish_failure_event(service, event) appends one
# event (failure/events.py) to the failure events topic of the namespace of event["topic"],
# when that namespace opted in (its letterbox_failure_events policy is enabled); otherwise it
# does nothing. Callers: the attempt log (a nack with a reason), the dead-letter router
# (dead-letter, terminate, park), the admin move (terminate), redrive (redrive, edit); the
# circuit breaker calls it with type "circuit".
# Order: events are queued in the order publish_failure_event is called (after the change
# they describe committed) and appended by ONE drain task per broker, in that order, each batch
# in one storage transaction -- so the events of one subscription reach the topic in the order
# they happened. An event whose append fails is counted and logged by the move transaction
# and dropped (events describe what happened; they never hold it back).
# The events topic itself never produces events (no recursion), and its message key is
# "<topic>/<subscription>", so a Key_Shared reader keeps each subscription's events in order.
# Memory: at most MAX_QUEUED events wait; beyond that the oldest are dropped and counted.
from __future__ import annotations

import collections
import contextlib
import json
import logging
import weakref
from typing import Any

from letterbox.broker.moves.move_ends import MovesBroker
from letterbox.broker.moves.move_transaction import MoveTransaction
from letterbox.broker.policies.namespace_policies import FAILURE_EVENTS as POLICY_KEY
from letterbox.broker.policies.namespace_policies import NAMESPACE_KEY
from letterbox.errors import InvalidTopicName
from letterbox.failure.events import (
    FailureEventsPolicy,
    encode_event,
    events_topic_name,
    is_failure_events_topic,
)
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.storage.errors import StorageError
from letterbox.topic_name import TopicName

log = logging.getLogger("letterbox")
PRODUCER_NAME = "letterbox-failure-events"
MAX_QUEUED = 100_000
BATCH = 500


class FailureEventPublisher:
    def __init__(self, service: MovesBroker) -> None:
        self.service = service
        self.queue: collections.deque[tuple[str, str, bytes]] = collections.deque()  # (ns, key, event)
        self.draining = False
        self.dropped = 0
        self.published = 0
        self.policies: dict[str, tuple[str | None, FailureEventsPolicy]] = {}  # ns -> (its document, policy)

    def policy(self, namespace: str) -> FailureEventsPolicy:
        """The namespace's policy, parsed again only when its stored document changed (a
        dead-letter move of many messages asks once per message)."""
        raw = self.service.store.get_metadata(NAMESPACE_KEY + namespace)
        known = self.policies.get(namespace)
        if known is not None and known[0] == raw:
            return known[1]
        policy = FailureEventsPolicy()
        doc: Any = {}
        with contextlib.suppress(ValueError):
            doc = json.loads(raw) if raw else {}
        value = doc.get(POLICY_KEY) if isinstance(doc, dict) else None
        if value:
            with contextlib.suppress(ValueError):  # edited by hand into something unreadable: off
                policy = FailureEventsPolicy.from_json(value)
        self.policies[namespace] = (raw, policy)
        return policy

    def publish(self, event: dict[str, Any]) -> bool:
        """Queue `event` for its namespace's events topic; False when that namespace did not opt in."""
        topic = str(event.get("topic") or "")
        namespace = self.opted_in_namespace(topic)
        if namespace is None:
            return False
        if len(self.queue) >= MAX_QUEUED:
            self.queue.popleft()
            self.dropped += 1
        key = f"{topic}/{event.get('subscription') or ''}"
        self.queue.append((namespace, key, encode_event(event)))
        if not self.draining:
            self.draining = True
            self.service.background(self._drain())
        return True

    def opted_in_namespace(self, topic: str) -> str | None:
        """The namespace of `topic` when it opted in to failure events; None when it did not,
        or for the events topic itself or a name that is no topic."""
        if not topic or is_failure_events_topic(topic):
            return None
        try:
            namespace = TopicName.parse(topic).namespace_name
        except InvalidTopicName:
            return None
        return namespace if self.policy(namespace).enabled else None

    async def _drain(self) -> None:
        try:
            while self.queue:
                batch = [self.queue.popleft() for _ in range(min(BATCH, len(self.queue)))]
                await self._append(batch)
        finally:
            self.draining = False
            if self.queue:  # queued while the last batch committed
                self.draining = True
                self.service.background(self._drain())

    async def _append(self, batch: list[tuple[str, str, bytes]]) -> None:
        service = self.service
        try:
            ledgers = {ns: service.persistent_topic(TopicName.parse(events_topic_name(ns)), create=True).ledger
                       for ns in {ns for ns, _k, _e in batch}}
            async with MoveTransaction(service, "failure-events") as move:
                now = service.clock.now_ms()
                for ns, key, data in batch:
                    ledger = ledgers[ns]
                    meta = pb.MessageMetadata(producer_name=PRODUCER_NAME, sequence_id=move.next_entry_id(ledger),
                                              publish_time=now, partition_key=key)
                    move.append(ledger, build_headers_and_payload(meta, data), 1, now, None)  # (no delivery time)
                await move.commit(f"{len(batch)} failure events")
            self.published += len(batch)
        except StorageError:
            self.dropped += len(batch)  # counted and logged by the move transaction
        except Exception:
            self.dropped += len(batch)
            log.exception("failure events: %d events could not be appended", len(batch))


_publishers: weakref.WeakKeyDictionary[Any, FailureEventPublisher] = weakref.WeakKeyDictionary()


def failure_event_publisher(service: MovesBroker) -> FailureEventPublisher:
    found = _publishers.get(service)
    if found is None:
        found = _publishers[service] = FailureEventPublisher(service)
    return found


def failure_events_wanted(service: MovesBroker, topic: str) -> bool:
    """Whether an event about `topic` would be published now (its namespace opted in): a
    caller moving many messages asks this once per topic and builds no event otherwise."""
    return failure_event_publisher(service).opted_in_namespace(topic) is not None


def publish_failure_event(service: MovesBroker, event: dict[str, Any]) -> bool:
    """Publish one failure event (build it with letterbox.failure.events.failure_event) on the
    events topic of its topic's namespace, if that namespace enabled failure events; call it
    after the change it describes committed. Never raises for the caller's sake; False when
    the namespace did not opt in (nothing is queued)."""
    try:
        return failure_event_publisher(service).publish(event)
    except Exception:
        log.exception("failure events: event %s not published", event.get("type"))
        return False
