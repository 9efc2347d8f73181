# What RetryConsumer (official sync client) and AsyncRetryConsumer (official
# asyncio client) share: their configuration (retry and dead letter topic
# names, the failure policy, the admin credentials, the counters) and the
# plan of every retry and dead-letter move. Which move a failed message gets
# is the failure core's decision (letterbox.failure.decide); this module
# turns it into a broker Move with the stamps of letterbox.failure. Neither
# consumer decides anything on its own: they only receive, acknowledge and
# carry the planned move out (blocking or awaited).
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pulsar

from letterbox import failure
from letterbox.auth_options import AuthOptions
from letterbox.client.broker_moves import Move
from letterbox.client.metrics import ConsumerCounters, CounterValues
from letterbox.client.property_errors import check_consumer_properties
from letterbox.failure import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DeadLetter,
    DeadLetterPolicy,
    DelayLevels,
    DeliverAt,
    DeliveryState,
    FailurePolicy,
    Nack,
    ReconsumeLater,
    RetryPolicy,
    Terminate,
    decide,
    origin_stamps,
    reconsume_times,
    retry_stamps,
    topic_role,
)
from letterbox.failure.attempts import clip_reason
from letterbox.failure.consumer_properties import ANNOUNCES_FAILURES, consumer_properties_of
from letterbox.failure.error_classes import ErrorRule, check_rules, error_info, match_rule
from letterbox.failure.error_classes import delay_ms as error_delay_ms
from letterbox.message_properties import (
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    origin_message_id,
)
from letterbox.topic_name import PARTITION_SUFFIX, TopicName

DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
MANAGED_KWARGS = ("message_listener", "dead_letter_policy")


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


def retry_consumer_type(consumer_type: pulsar.ConsumerType) -> pulsar.ConsumerType:
    """The retry topic's subscription type: delays are honoured on Shared and Key_Shared only."""
    if consumer_type in (pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared):
        return consumer_type
    return pulsar.ConsumerType.Shared


class RetryCore:
    """Configuration and move planning of a retrying consumer (see the module header)."""

    def __init__(
        self,
        owner: str,
        topic: str,
        subscription_name: str,
        *,
        enable_retry: bool,
        dead_letter_policy: DeadLetterPolicy | None,
        delay_levels: DelayLevels | None,
        admin_url: str | None,
        error_classes: Mapping[str, ErrorRule] | None = None,
        auth_token: str | Callable[[], str] | None,
        tls_trust_certs_file_path: str | None,
        admin_auth: AuthOptions | None,
        subscribe_kwargs: Mapping[str, Any],
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"{owner} takes one topic name (a partitioned topic is fine)")
        for key in MANAGED_KWARGS:
            if key in subscribe_kwargs:
                raise TypeError(f"{key} is managed by {owner}")
        self.topic = str(TopicName.parse(topic))
        self.subscription_name = subscription_name
        self.dead_letter_policy = dlp = dead_letter_policy
        self.delay_levels = delay_levels or DelayLevels()
        # exception class name -> what it means (resolved here, against the class's MRO)
        self.error_classes = check_rules(error_classes or {})
        self.max_reconsume_times = dlp.max_redeliver_count if dlp else DEFAULT_MAX_RECONSUME_TIMES
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
        self.admin_auth = admin_auth
        self.admin_url = admin_url or os.environ.get("LETTERBOX_ADMIN_URL", DEFAULT_ADMIN_URL)
        name = TopicName.parse(self.topic)
        self._counters = ConsumerCounters(name.tenant, name.namespace, self.topic, subscription_name)

    # --- subscribing ---------------------------------------------------------------------
    def subscribe_properties(self, given: Mapping[str, str] | None) -> dict[str, str]:
        """The consumer properties: the user's plus the letterbox.dlq.* ones, so nack and
        ack-timeout redeliveries dead-letter on the broker into the same DLQ, and the mark
        that this consumer announces its nacks (so the broker tells them from ack timeouts)."""
        properties = dict(given or {})
        properties[ANNOUNCES_FAILURES] = "true"
        for key, value in consumer_properties_of(self.dead_letter_policy,
                                                 dead_letter_topic=self.dead_letter_topic).items():
            properties.setdefault(key, value)
        check_consumer_properties(properties)  # a misspelled letterbox.* key: ConsumerPropertyError naming it
        return properties

    @staticmethod
    def retry_subscribe_kwargs(subscribe_kwargs: Mapping[str, Any],
                               consumer_type: pulsar.ConsumerType) -> dict[str, Any]:
        """The retry topic's subscribe arguments: from the earliest message, Shared if need be."""
        kwargs = dict(subscribe_kwargs)
        kwargs["initial_position"] = pulsar.InitialPosition.Earliest
        if retry_consumer_type(consumer_type) != consumer_type:
            kwargs.pop("key_shared_policy", None)
        return kwargs

    def is_retry_message(self, msg: pulsar.Message) -> bool:
        """Whether `msg` came from the retry topic (or one of its partitions)."""
        if self.retry_topic is None:
            return False
        topic: str = msg.topic_name()
        return topic == self.retry_topic or topic.startswith(self.retry_topic + PARTITION_SUFFIX)

    # --- planning moves ------------------------------------------------------------------
    def plan_reconsume(self, msg: pulsar.Message, delay: timedelta | float | None, level: int | None,
                       properties: Mapping[str, str] | None) -> Move:
        """The move of a reconsume_later: to the retry topic, or past the maximum to the DLQ."""
        outcome = decide(self._state(msg), ReconsumeLater(delay, level), self._policy, _now_ms())
        if isinstance(outcome, DeadLetter):
            return self._dead_letter_move(msg, outcome.reason, outcome.description)
        if not isinstance(outcome, DeliverAt) or self.retry_topic is None:
            raise RuntimeError(getattr(outcome, "message", f"cannot retry: {outcome!r}"))
        stamps = dict(properties or {})
        stamps.update(self._origin(msg))
        stamps.update(retry_stamps(outcome.count, outcome.delay_ms, self.retry_topic))
        return Move(
            topic=msg.topic_name(), subscription=self.subscription_name, message_id=message_id_text(msg),
            target=self.retry_topic, properties=stamps, deliver_after_ms=outcome.delay_ms,
        )

    def plan_worn_out(self, msg: pulsar.Message) -> Move | None:
        """Without the broker's policy (produce-then-acknowledge fallback): the dead-letter move
        of a message redelivered more than max_redeliver_count times, as Pulsar's Java client
        decides it client-side; None for any other message."""
        if msg.redelivery_count() == 0:
            return None
        # the failure core's decision on the failure that brought this redelivery
        before = replace(self._state(msg), redelivery_count=msg.redelivery_count() - 1)
        outcome = decide(before, Nack(), self._policy, _now_ms())
        if not isinstance(outcome, DeadLetter):
            return None
        return self._dead_letter_move(msg, outcome.reason, None)

    def plan_terminate(self, msg: pulsar.Message, description: str | None) -> Move:
        """The move of a terminate; raises TerminateWithoutDeadLetterPolicy without a policy."""
        outcome = decide(self._state(msg), Terminate(description), self._policy, _now_ms())
        if not isinstance(outcome, DeadLetter):
            raise TerminateWithoutDeadLetterPolicy(
                "terminate() needs a dead letter policy: create the consumer with "
                "dead_letter_policy=DeadLetterPolicy(max_redeliver_count=...)"
            )
        return self._dead_letter_move(msg, outcome.reason, outcome.description)

    def count_move(self, move: Move, terminated: bool = False) -> None:
        """Count a move that was carried out."""
        if move.dead_letter_reason is None:
            self._counters.retry.inc()
        else:
            self._counters.dlq.inc()
        if terminated:
            self._counters.terms.inc()

    def nack_announcement(self, msg: pulsar.Message, reason: str | None, error: BaseException | None = None,
                          retry_after: timedelta | float | None = None
                          ) -> tuple[str, str, str, str | None, dict[str, Any]]:
        """What announces a nack of `msg` to the broker: topic, subscription, message id, the
        reason (at most letterbox.failure.attempts.MAX_REASON_CHARS characters; the error's
        message when none is given) and the error class fields (errorClass, fingerprint and
        the matched rule, with `retry_after` overriding its delay)."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str or None, got {type(reason).__name__}")
        if error is not None and not isinstance(error, BaseException):
            raise TypeError(f"error must be an exception, got {type(error).__name__}")
        extra: dict[str, Any] = {}
        rule: ErrorRule | None = None
        if error is not None:
            info = error_info(error)
            extra = {"errorClass": info.error_class, "fingerprint": info.fingerprint}
            if reason is None:
                reason = info.message
            matched = match_rule(type(error), self.error_classes)
            rule = matched[1] if matched is not None else None
        if retry_after is not None:
            ms = error_delay_ms(retry_after)
            rule = replace(rule, retry_after_ms=ms) if rule is not None else ErrorRule(retry_after_ms=ms)
        if rule is not None:
            extra["rule"] = rule.to_json()
        return msg.topic_name(), self.subscription_name, message_id_text(msg), clip_reason(reason), extra

    def count_nack(self) -> None:
        self._counters.nack.inc()

    @property
    def counters(self) -> CounterValues:
        """Messages terminated, dead-lettered, reconsumed and nacked by this consumer."""
        return self._counters.values()

    def _state(self, msg: pulsar.Message) -> DeliveryState:
        return DeliveryState(
            redelivery_count=msg.redelivery_count(),
            reconsume_times=reconsume_times(msg.properties()),
            topic_role=topic_role(self.topic),
        )

    def _dead_letter_move(self, msg: pulsar.Message, reason: str, description: str | None) -> Move:
        dlp = self.dead_letter_policy
        return Move(
            topic=msg.topic_name(), subscription=self.subscription_name, message_id=message_id_text(msg),
            target=self.dead_letter_topic, properties=self._origin(msg), dead_letter_reason=reason,
            description=description, initial_subscription=dlp.initial_subscription_name if dlp else None,
        )

    def _origin(self, msg: pulsar.Message) -> dict[str, str]:
        old = msg.properties()  # a message moved before keeps its first origin
        return origin_stamps(old.get(REAL_TOPIC) or msg.topic_name(),
                             old.get(ORIGIN_MESSAGE_ID) or message_id_text(msg))


def _now_ms() -> int:
    return int(time.time() * 1000)
