# The fallback of RetryConsumer / AsyncRetryConsumer on a broker without the
# atomic move (Apache Pulsar, or letterbox --pulsar-compatible-only): what
# Pulsar's Java client does — produce the message to the retry or dead letter
# topic with the same stamps (REAL_TOPIC, ORIGIN_MESSAGE_ID, RECONSUMETIMES,
# DELAY_TIME, ...; the delay as deliver_after), then acknowledge it. A crash
# between the two can duplicate it in the target topic; to narrow that
# window every target gets one producer per consumer, named
# `<topic>-<subscription>-<consumer>-RETRY|DLQ` (the Java client's DLQ
# producer name), with explicit increasing sequence ids continuing from the
# producer's last one, so a broker with deduplication on drops a resend.
# Every message component is kept: payload, key, ordering key, event time and
# the properties (the move's stamps over the message's own). A dead letter
# topic with an initial subscription gets it (a consumer opened once at the
# earliest position) before its first message, so nothing sent is dropped.
# detect_log() says once per consumer that this path is in use.
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio

from letterbox.client.broker_moves import Move
from letterbox.failure import dead_letter_stamps

log = logging.getLogger("letterbox.client")
FALLBACK_LOG = "broker has no atomic move; falling back to produce-then-acknowledge"


def detect_log(admin_url: str, topic: str, subscription: str) -> None:
    log.warning("%s (admin API at %s answered 404 to the letterbox probe; consumer of %s, subscription %s)",
                FALLBACK_LOG, admin_url, topic, subscription)


@dataclass(frozen=True)
class Outgoing:
    """One message to produce in place of a move."""

    content: bytes
    properties: dict[str, str]
    partition_key: str | None
    ordering_key: str | None
    event_timestamp: int | None
    deliver_after: timedelta | None


def outgoing(move: Move, msg: pulsar.Message) -> Outgoing:
    """The message a move produces: the original's components, the move's stamps on top."""
    props = dict(msg.properties())
    props.update(move.properties)
    if move.dead_letter_reason is not None:
        props.update(dead_letter_stamps(move.dead_letter_reason, int(time.time() * 1000), move.subscription,
                                        delivery_count=msg.redelivery_count(), description=move.description))
    return Outgoing(
        content=msg.data(),
        properties=props,
        partition_key=msg.partition_key() or None,
        ordering_key=msg.ordering_key() or None,
        event_timestamp=msg.event_timestamp() or None,
        deliver_after=timedelta(milliseconds=move.deliver_after_ms) if move.deliver_after_ms > 0 else None,
    )


def producer_name(move: Move, consumer_name: str) -> str:
    suffix = "RETRY" if move.dead_letter_reason is None else "DLQ"
    return f"{move.topic}-{move.subscription}-{consumer_name}-{suffix}"


def _send_kwargs(out: Outgoing, sequence_id: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"properties": out.properties, "sequence_id": sequence_id}
    for key in ("partition_key", "ordering_key", "event_timestamp", "deliver_after"):
        value = getattr(out, key)
        if value is not None:
            kwargs[key] = value
    return kwargs


class ProduceMoves:
    """Produce-then-acknowledge moves on the official sync client (thread-safe)."""

    def __init__(self, client: pulsar.Client, consumer_name: str) -> None:
        self._client = client
        self._consumer_name = consumer_name
        self._lock = threading.Lock()
        self._producers: dict[str, tuple[pulsar.Producer, list[int]]] = {}

    def produce(self, move: Move, msg: pulsar.Message) -> None:
        out = outgoing(move, msg)
        with self._lock:
            producer, seq = self._producer(move)
            seq[0] += 1
            producer.send(out.content, **_send_kwargs(out, seq[0]))

    def _producer(self, move: Move) -> tuple[pulsar.Producer, list[int]]:
        found = self._producers.get(move.target)
        if found is None:
            if move.initial_subscription:
                self._client.subscribe(move.target, move.initial_subscription,
                                       initial_position=pulsar.InitialPosition.Earliest).close()
            producer = self._client.create_producer(
                move.target, producer_name=producer_name(move, self._consumer_name), batching_enabled=False)
            found = self._producers[move.target] = (producer, [max(producer.last_sequence_id(), -1)])
        return found

    def close(self) -> None:
        with self._lock:
            for producer, _ in self._producers.values():
                producer.close()
            self._producers.clear()


class AsyncProduceMoves:
    """Produce-then-acknowledge moves on the official asyncio client (one event loop)."""

    def __init__(self, client: pulsar_asyncio.Client, consumer_name: str) -> None:
        self._client = client
        self._consumer_name = consumer_name
        self._lock = asyncio.Lock()
        self._producers: dict[str, tuple[pulsar_asyncio.Producer, list[int]]] = {}

    async def produce(self, move: Move, msg: pulsar.Message) -> None:
        out = outgoing(move, msg)
        async with self._lock:
            producer, seq = await self._producer(move)
            seq[0] += 1
            await producer.send(out.content, **_send_kwargs(out, seq[0]))

    async def _producer(self, move: Move) -> tuple[pulsar_asyncio.Producer, list[int]]:
        found = self._producers.get(move.target)
        if found is None:
            if move.initial_subscription:
                consumer = await self._client.subscribe(move.target, move.initial_subscription,
                                                        initial_position=pulsar.InitialPosition.Earliest)
                await consumer.close()
            producer = await self._client.create_producer(
                move.target, producer_name=producer_name(move, self._consumer_name), batching_enabled=False)
            found = self._producers[move.target] = (producer, [max(producer.last_sequence_id(), -1)])
        return found

    async def close(self) -> None:
        async with self._lock:
            for producer, _ in self._producers.values():
                await producer.close()
            self._producers.clear()
