# RetryConsumer: the official client's consumer plus what the Java client has
# and the Python one lacks — a retry letter topic (`reconsume_later`) and
# PIP-372's `terminate`. It holds two official consumers under one
# subscription name: one on the topic, one on its retry topic, both feeding
# one receive queue through message listeners.
#
# Every retry and dead-letter move is the broker's atomic move (append to the
# retry or dead letter topic + acknowledge in the subscription, one
# transaction), asked for over the admin API. So no interleaving of a crash
# with a move can put a message twice into the retry or dead letter topic or
# lose it: before the move the message is still unacknowledged and comes
# back; after it, the move is done, and asking again moves nothing.
#
# What happens to a retried or terminated message (retry with which delay, or
# dead letter) is the failure core's decision (letterbox.failure.decide), as
# are the topic names, the stamps and the policy types.
#
# Delays are delayed deliveries on the retry topic. The broker honours them on
# Shared and Key_Shared subscriptions only (as Pulsar does), so for an
# Exclusive or Failover consumer the retry topic is subscribed as Shared:
# retries wait their delay on every subscription type.
from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pulsar

from letterbox import failure
from letterbox.auth_options import AuthOptions
from letterbox.client.broker_moves import DEFAULT_RETRY_SECONDS, BrokerMoves, Move
from letterbox.client.metrics import ConsumerCounters, CounterValues
from letterbox.failure import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DeadLetter,
    DeadLetterPolicy,
    DelayLevels,
    DeliverAt,
    DeliveryState,
    FailurePolicy,
    ReconsumeLater,
    RetryPolicy,
    Terminate,
    decide,
    origin_stamps,
    reconsume_times,
    retry_stamps,
    topic_role,
)
from letterbox.failure.consumer_properties import consumer_properties_of
from letterbox.message_properties import ORIGIN_MESSAGE_ID, REAL_TOPIC, origin_message_id
from letterbox.topic_name import PARTITION_SUFFIX, TopicName

DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
_QUEUE_SIZE = 100


class TerminateWithoutDeadLetterPolicy(RuntimeError):
    """terminate() was called on a consumer that has no dead letter policy (PIP-372)."""


def retry_topic_name(topic: str, subscription: str) -> str:
    """`<topic>-<subscription>-RETRY` in the topic's namespace (the partitioned parent's name)."""
    return failure.retry_topic_name(str(TopicName.parse(topic)), subscription)


def dead_letter_topic_name(topic: str, subscription: str) -> str:
    """`<topic>-<subscription>-DLQ` in the topic's namespace (the partitioned parent's name)."""
    return failure.dead_letter_topic_name(str(TopicName.parse(topic)), subscription)


def message_id_text(msg: pulsar.Message) -> str:
    """A message's id as `ledger:entry:partition:batchIndex`, the form ORIGIN_MESSAGE_ID uses."""
    mid = msg.message_id()
    return origin_message_id(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())


class RetryConsumer:
    """A consumer of `topic` under `subscription_name` with retry and terminate.

    Use it like the official consumer (`receive`, `acknowledge`,
    `negative_acknowledge`, `close`); failed messages go through
    `reconsume_later` (retry after a delay) or `terminate` (straight to the
    dead letter topic). Other keyword arguments go to `pulsar.Client.subscribe`.

    With authentication on, the moves (admin API calls) need the consumer's
    credentials too: `auth_token` (the token, or a callable returning it, as
    given to pulsar.AuthenticationToken; default env LETTERBOX_AUTH_TOKEN) and
    `tls_trust_certs_file_path` for an https:// admin_url, or `admin_auth` for
    basic or TLS-certificate authentication. A role with consume on the topic's
    namespace may move to this subscription's own retry and dead letter topics.

    A move the broker cannot be reached for (restarting, storage degraded:
    502/503/504) is retried with backoff for `move_retry_seconds` (default 30)
    before `reconsume_later` / `terminate` raise BrokerMoveError.
    """

    def __init__(
        self,
        client: pulsar.Client,
        topic: str,
        subscription_name: str,
        *,
        consumer_type: pulsar.ConsumerType = pulsar.ConsumerType.Shared,
        enable_retry: bool = True,
        dead_letter_policy: DeadLetterPolicy | None = None,
        delay_levels: DelayLevels | None = None,
        admin_url: str | None = None,
        auth_token: str | Callable[[], str] | None = None,
        tls_trust_certs_file_path: str | None = None,
        admin_auth: AuthOptions | None = None,
        move_retry_seconds: float = DEFAULT_RETRY_SECONDS,
        **subscribe_kwargs: Any,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError("RetryConsumer takes one topic name (a partitioned topic is fine)")
        for key in ("message_listener", "dead_letter_policy"):
            if key in subscribe_kwargs:
                raise TypeError(f"{key} is managed by RetryConsumer")
        self.topic = str(TopicName.parse(topic))
        self.subscription_name = subscription_name
        self.dead_letter_policy = dead_letter_policy
        self.delay_levels = delay_levels or DelayLevels()
        self.max_reconsume_times = (
            dead_letter_policy.max_redeliver_count if dead_letter_policy else DEFAULT_MAX_RECONSUME_TIMES
        )
        dlp = dead_letter_policy
        self.dead_letter_topic = str(TopicName.parse(dlp.dead_letter_topic)) if dlp and dlp.dead_letter_topic \
            else dead_letter_topic_name(self.topic, subscription_name)
        self.retry_topic: str | None = None
        if enable_retry:
            self.retry_topic = str(TopicName.parse(dlp.retry_letter_topic)) if dlp and dlp.retry_letter_topic \
                else retry_topic_name(self.topic, subscription_name)
        self._policy = FailurePolicy(
            dead_letter=dlp,
            retry=RetryPolicy.from_levels(self.max_reconsume_times, self.delay_levels) if enable_retry else None,
        )
        if admin_auth is None:  # the same token as the client's AuthenticationToken, for the admin moves
            admin_auth = AuthOptions.from_token(
                auth_token or os.environ.get("LETTERBOX_AUTH_TOKEN") or None, tls_trust_certs_file_path or ""
            )
        self._moves = BrokerMoves(
            admin_url or os.environ.get("LETTERBOX_ADMIN_URL", DEFAULT_ADMIN_URL), auth=admin_auth,
            retry_for=move_retry_seconds,
        )
        name = TopicName.parse(self.topic)
        self._counters = ConsumerCounters(name.tenant, name.namespace, self.topic, subscription_name)
        self._queue: queue.Queue[pulsar.Message] = queue.Queue(_QUEUE_SIZE)
        self._closing = False

        properties = dict(subscribe_kwargs.pop("properties", None) or {})
        # nack and ack-timeout redeliveries dead-letter on the broker, same DLQ
        for key, value in consumer_properties_of(dlp, dead_letter_topic=self.dead_letter_topic).items():
            properties.setdefault(key, value)
        self._main = client.subscribe(
            self.topic, subscription_name, consumer_type=consumer_type,
            message_listener=self._listener, properties=properties, **subscribe_kwargs,
        )
        self._retry: pulsar.Consumer | None = None
        if self.retry_topic is not None:
            retry_type = consumer_type if consumer_type in (
                pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared) else pulsar.ConsumerType.Shared
            retry_kwargs = dict(subscribe_kwargs)
            retry_kwargs["initial_position"] = pulsar.InitialPosition.Earliest
            if retry_type != consumer_type:
                retry_kwargs.pop("key_shared_policy", None)
            try:
                self._retry = client.subscribe(
                    self.retry_topic, subscription_name, consumer_type=retry_type,
                    message_listener=self._listener, properties=properties, **retry_kwargs,
                )
            except Exception:
                self._main.close()
                raise

    # --- receiving and acknowledging ------------------------------------------------------
    def _listener(self, consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
        while not self._closing:  # a full queue holds the listener back: that is the flow control
            try:
                self._queue.put(msg, timeout=0.1)
                return
            except queue.Full:
                continue

    def receive(self, timeout_millis: int | None = None) -> pulsar.Message:
        """The next message from the topic or its retry topic; raises pulsar.Timeout."""
        try:
            return self._queue.get(timeout=None if timeout_millis is None else timeout_millis / 1000)
        except queue.Empty:
            raise pulsar.Timeout(f"no message within {timeout_millis} ms") from None

    def _consumer_of(self, msg: pulsar.Message) -> pulsar.Consumer:
        """The official consumer a message came from: the retry topic's (or one of its
        partitions') or the topic's."""
        if self._retry is not None and self.retry_topic is not None:
            topic = msg.topic_name()
            if topic == self.retry_topic or topic.startswith(self.retry_topic + PARTITION_SUFFIX):
                return self._retry
        return self._main

    def acknowledge(self, msg: pulsar.Message) -> None:
        """Acknowledge `msg` (from the topic or the retry topic)."""
        self._consumer_of(msg).acknowledge(msg)

    def negative_acknowledge(self, msg: pulsar.Message) -> None:
        """Have `msg` redelivered after the negative-ack delay; counts as a delivery."""
        self._consumer_of(msg).negative_acknowledge(msg)
        self._counters.nack.inc()

    # --- retry and terminate ----------------------------------------------------------------
    def reconsume_later(
        self,
        msg: pulsar.Message,
        delay: timedelta | float | None = None,
        *,
        level: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Retry `msg` later through the retry topic, acknowledging it here.

        `delay` is a timedelta or seconds (1 to 864,000); or `level` picks a
        delay from the level table; with neither, the n-th retry waits the
        n-th level (level-increment backoff). `properties` are added to the
        retried message. Past the dead letter policy's maximum the message
        goes to the dead letter topic instead.
        """
        outcome = decide(self._state(msg), ReconsumeLater(delay, level), self._policy, _now_ms())
        if isinstance(outcome, DeadLetter):
            self._dead_letter(msg, outcome.reason, outcome.description)
            return
        if not isinstance(outcome, DeliverAt) or self.retry_topic is None:
            raise RuntimeError(getattr(outcome, "message", f"cannot retry: {outcome!r}"))
        stamps = dict(properties or {})
        stamps.update(self._origin(msg))
        stamps.update(retry_stamps(outcome.count, outcome.delay_ms, self.retry_topic))
        self._move(msg, Move(
            topic=msg.topic_name(), subscription=self.subscription_name, message_id=message_id_text(msg),
            target=self.retry_topic, properties=stamps, deliver_after_ms=outcome.delay_ms,
        ))
        self._counters.retry.inc()

    def terminate(self, msg: pulsar.Message, description: str | None = None) -> None:
        """Send `msg` to the dead letter topic now, with reason "terminated" (PIP-372).

        Raises TerminateWithoutDeadLetterPolicy, leaving the message untouched,
        when the consumer has no dead letter policy.
        """
        outcome = decide(self._state(msg), Terminate(description), self._policy, _now_ms())
        if not isinstance(outcome, DeadLetter):
            raise TerminateWithoutDeadLetterPolicy(
                "terminate() needs a dead letter policy: create the consumer with "
                "dead_letter_policy=DeadLetterPolicy(max_redeliver_count=...)"
            )
        self._dead_letter(msg, outcome.reason, outcome.description)
        self._counters.terms.inc()

    def _state(self, msg: pulsar.Message) -> DeliveryState:
        return DeliveryState(
            redelivery_count=msg.redelivery_count(),
            reconsume_times=reconsume_times(msg.properties()),
            topic_role=topic_role(self.topic),
        )

    def _dead_letter(self, msg: pulsar.Message, reason: str, description: str | None) -> None:
        dlp = self.dead_letter_policy
        self._move(msg, Move(
            topic=msg.topic_name(), subscription=self.subscription_name, message_id=message_id_text(msg),
            target=self.dead_letter_topic, properties=self._origin(msg), dead_letter_reason=reason,
            description=description, initial_subscription=dlp.initial_subscription_name if dlp else None,
        ))
        self._counters.dlq.inc()

    def _origin(self, msg: pulsar.Message) -> dict[str, str]:
        old = msg.properties()  # a message moved before keeps its first origin
        return origin_stamps(old.get(REAL_TOPIC) or msg.topic_name(),
                             old.get(ORIGIN_MESSAGE_ID) or message_id_text(msg))

    def _move(self, msg: pulsar.Message, move: Move) -> None:
        consumer = self._consumer_of(msg)
        self._moves.move(move)
        consumer.acknowledge(msg)  # the broker has acknowledged it; this clears the client's tracking

    # --- the rest ----------------------------------------------------------------------------
    @property
    def counters(self) -> CounterValues:
        """Messages terminated, dead-lettered, reconsumed and nacked by this consumer."""
        return self._counters.values()

    def close(self) -> None:
        self._shut(unsubscribe=False)

    def unsubscribe(self) -> None:
        """Remove the subscription from the topic and from its retry topic."""
        self._shut(unsubscribe=True)

    def _shut(self, unsubscribe: bool) -> None:
        self._closing = True  # releases a listener waiting on a full queue
        for consumer in (self._main, self._retry):
            if consumer is not None:
                consumer.unsubscribe() if unsubscribe else consumer.close()
        self._moves.close()

    def __enter__(self) -> RetryConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
