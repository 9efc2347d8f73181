# The end of a terminated topic as its subscriptions tell it (topic_termination.py
# terminates): once a subscription of a terminated topic has nothing left to acknowledge
# (as Pulsar: only once nothing is left in the backlog), each of its consumers is told
# REACHED_END_OF_TOPIC, once, on the next loop turn. It sees the subscription and its
# consumers through the Protocols below (topics.subscription.Subscription and
# topics.consumer.Consumer meet them), so that the subscription can call it.
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from letterbox.protocol import commands

if TYPE_CHECKING:
    from letterbox.broker.topics.client_connection import ClientConnection
    from letterbox.storage.position import Position


class EndingConsumer(Protocol):
    @property
    def cnx(self) -> ClientConnection: ...
    @property
    def consumer_id(self) -> int: ...
    @property
    def closed(self) -> bool: ...


class EndingTopic(Protocol):
    @property
    def terminated(self) -> Position | None: ...


class EndingSubscription(Protocol):
    @property
    def topic(self) -> EndingTopic: ...
    @property
    def consumers(self) -> Sequence[EndingConsumer]: ...

    def backlog(self) -> int: ...


# Clients built on the C++ library (the Python one included) have no handler for
# REACHED_END_OF_TOPIC: they log "Received invalid message from server" and drop the
# connection, so they are not sent it (their consumers see no more messages; a reader's
# has_message_available() is False at the end). Java and Go clients handle it.
_NO_END_OF_TOPIC = ("Pulsar-CPP", "Pulsar-Python", "Pulsar-Node")

# consumers already told REACHED_END_OF_TOPIC (told once each)
_told: weakref.WeakSet[EndingConsumer] = weakref.WeakSet()


def notify_end_of_topic(sub: EndingSubscription) -> None:
    """After an ack, a new consumer or the termination: a subscription of a terminated topic
    with nothing left to acknowledge tells each of its consumers REACHED_END_OF_TOPIC once,
    on the next loop turn (after the SUBSCRIBE answer of a new consumer)."""
    if sub.topic.terminated is not None:
        asyncio.get_running_loop().call_soon(_tell, sub)


def _tell(sub: EndingSubscription) -> None:
    if sub.topic.terminated is None or sub.backlog() > 0:
        return
    for consumer in sub.consumers:
        if consumer.cnx.client_version.startswith(_NO_END_OF_TOPIC):
            continue
        if consumer not in _told and not consumer.closed:
            _told.add(consumer)
            consumer.cnx.send(commands.reached_end_of_topic(consumer.consumer_id), consumer_id=consumer.consumer_id)
