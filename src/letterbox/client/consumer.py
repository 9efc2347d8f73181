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
# are the topic names, the stamps and the policy types; the configuration and
# the planning of moves are shared with AsyncRetryConsumer (retry_core.py).
#
# On a broker without the atomic move (Apache Pulsar: one probe at start
# answers 404) moves fall back to produce-then-acknowledge as Pulsar's Java
# client does (produce_moves.py), nack reasons are not announced, and a
# message redelivered past the dead letter policy's maximum is dead-lettered
# here on receipt (the broker has no policy).
#
# Delays are delayed deliveries on the retry topic. The broker honours them on
# Shared and Key_Shared subscriptions only (as Pulsar does), so for an
# Exclusive or Failover consumer the retry topic is subscribed as Shared:
# retries wait their delay on every subscription type.
from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pulsar

from letterbox.auth_options import AuthOptions
from letterbox.client.broker_moves import DEFAULT_RETRY_SECONDS, BrokerMoveError, BrokerMoves, Move
from letterbox.client.produce_moves import ProduceMoves, detect_log
from letterbox.client.retry_core import (
    DEFAULT_ADMIN_URL,
    RetryCore,
    TerminateWithoutDeadLetterPolicy,
    dead_letter_topic_name,
    message_id_text,
    retry_consumer_type,
    retry_topic_name,
)
from letterbox.failure import DeadLetterPolicy, DelayLevels, ErrorRule

__all__ = [
    "DEFAULT_ADMIN_URL",
    "RetryConsumer",
    "TerminateWithoutDeadLetterPolicy",
    "dead_letter_topic_name",
    "message_id_text",
    "retry_topic_name",
]

_QUEUE_SIZE = 100
log = logging.getLogger("letterbox.client")


class RetryConsumer(RetryCore):
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
        error_classes: Mapping[str, ErrorRule] | None = None,
        admin_url: str | None = None,
        auth_token: str | Callable[[], str] | None = None,
        tls_trust_certs_file_path: str | None = None,
        admin_auth: AuthOptions | None = None,
        move_retry_seconds: float = DEFAULT_RETRY_SECONDS,
        **subscribe_kwargs: Any,
    ) -> None:
        super().__init__(
            "RetryConsumer", topic, subscription_name, enable_retry=enable_retry,
            dead_letter_policy=dead_letter_policy, delay_levels=delay_levels, error_classes=error_classes,
            admin_url=admin_url,
            auth_token=auth_token, tls_trust_certs_file_path=tls_trust_certs_file_path,
            admin_auth=admin_auth, subscribe_kwargs=subscribe_kwargs,
        )
        self._moves = BrokerMoves(self.admin_url, auth=self.admin_auth, retry_for=move_retry_seconds)
        self._queue: queue.Queue[pulsar.Message] = queue.Queue(_QUEUE_SIZE)
        self._closing = False
        self._client = client
        self._fallback: ProduceMoves | None = None
        properties = self.subscribe_properties(subscribe_kwargs.pop("properties", None))
        self._atomic = self._moves.has_atomic_move(self.topic)  # None: admin API unreachable, asked again later
        try:
            self._main = client.subscribe(
                self.topic, subscription_name, consumer_type=consumer_type,
                message_listener=self._listener, properties=properties, **subscribe_kwargs,
            )
        except Exception:
            self._moves.close()  # the probe's connection
            raise
        self._retry: pulsar.Consumer | None = None
        if self.retry_topic is not None:
            retry_type = retry_consumer_type(consumer_type)
            retry_kwargs = self.retry_subscribe_kwargs(subscribe_kwargs, consumer_type)
            try:
                self._retry = client.subscribe(
                    self.retry_topic, subscription_name, consumer_type=retry_type,
                    message_listener=self._listener, properties=properties, **retry_kwargs,
                )
            except Exception:
                self._main.close()
                self._moves.close()
                raise
        self._settle(self._atomic)

    def _settle(self, atomic: bool | None) -> None:
        self._atomic = atomic
        if atomic is False and self._fallback is None:
            self._fallback = ProduceMoves(self._client, self._main.consumer_name())
            detect_log(self.admin_url, self.topic, self.subscription_name)

    def _atomic_moves(self) -> bool:
        """Whether moves are the broker's atomic move (False: produce-then-acknowledge); a probe
        the start could not make is made now, retried as a move is."""
        if self._atomic is None:
            self._settle(self._moves.has_atomic_move(self.topic, retry_for=None))
        return self._atomic is not False

    @property
    def atomic_moves(self) -> bool | None:
        """True: the broker's atomic move; False: produce-then-acknowledge; None: not known yet."""
        return self._atomic

    # --- receiving and acknowledging ------------------------------------------------------
    def _listener(self, consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
        worn_out = self.plan_worn_out(msg) if self._fallback is not None else None
        if worn_out is not None:  # as Pulsar's Java client: dead-lettered on arrival, never handed out
            try:
                self._move(msg, worn_out)
                self.count_move(worn_out)
                return
            except Exception:
                log.exception("could not dead-letter %s (redelivered %d times); handing it out",
                              msg.message_id(), msg.redelivery_count())
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
        """The official consumer a message came from: the retry topic's or the topic's."""
        return self._retry if self._retry is not None and self.is_retry_message(msg) else self._main

    def acknowledge(self, msg: pulsar.Message) -> None:
        """Acknowledge `msg` (from the topic or the retry topic)."""
        self._consumer_of(msg).acknowledge(msg)

    def negative_acknowledge(self, msg: pulsar.Message, reason: str | None = None, *,
                             error: BaseException | None = None,
                             retry_after: timedelta | float | None = None) -> None:
        """Have `msg` redelivered after the negative-ack delay; counts as a delivery.

        The nack, and `reason` if given, go into the message's delivery attempt log on
        the broker (and into its dead letter's FAILURE_DESCRIPTION, if it dies). `error`:
        the exception the handler failed with: its class, message (the reason when none
        is given) and stack fingerprint are recorded too, and the rule `error_classes`
        maps its class to (non-retryable, retry-after, a maximum of attempts) applies.
        `retry_after` (a timedelta or seconds): the next delivery waits that long on the
        broker. The announcement is tried once; if the broker cannot be reached the nack
        is still made (the broker then records this attempt as an ack timeout)."""
        announcement = self.nack_announcement(msg, reason, error, retry_after)  # bad arguments raise first
        try:
            if self._atomic is not False:  # Apache Pulsar takes no announcement: the reason is dropped
                self._moves.announce(*announcement)
        except BrokerMoveError as exc:
            log.warning("nack of %s not announced (recorded as an ack timeout): %s", msg.message_id(), exc)
        self._consumer_of(msg).negative_acknowledge(msg)
        self.count_nack()

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
        move = self.plan_reconsume(msg, delay, level, properties)
        self._move(msg, move)
        self.count_move(move)

    def terminate(self, msg: pulsar.Message, description: str | None = None) -> None:
        """Send `msg` to the dead letter topic now, with reason "terminated" (PIP-372).

        Raises TerminateWithoutDeadLetterPolicy, leaving the message untouched,
        when the consumer has no dead letter policy.
        """
        move = self.plan_terminate(msg, description)
        self._move(msg, move)
        self.count_move(move, terminated=True)

    def _move(self, msg: pulsar.Message, move: Move) -> None:
        consumer = self._consumer_of(msg)
        if not self._atomic_moves() and self._fallback is not None:
            self._fallback.produce(move, msg)
        else:
            self._moves.move(move)
        consumer.acknowledge(msg)  # the broker has acknowledged it; this clears the client's tracking

    # --- the rest ----------------------------------------------------------------------------
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
        if self._fallback is not None:
            self._fallback.close()
        self._moves.close()

    def __enter__(self) -> RetryConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

