"""Additions to the official `pulsar` client: a retry letter topic
(`reconsume_later`) and terminal rejection (`terminate`, PIP-372), with
counters. See docs/retry-and-terminate.md.

    consumer = RetryConsumer(client, "orders", "billing",
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3),
                             admin_url="http://127.0.0.1:8080")
"""
from letterbox.client.async_consumer import AsyncRetryConsumer
from letterbox.client.broker_moves import BrokerMoveError
from letterbox.client.consumer import (
    RetryConsumer,
    TerminateWithoutDeadLetterPolicy,
    dead_letter_topic_name,
    message_id_text,
    retry_topic_name,
)
from letterbox.client.metrics import REGISTRY, CounterValues, metrics_text
from letterbox.client.property_errors import (
    ConsumerPropertyError,
    check_consumer_properties,
    subscribe,
)
from letterbox.failure import DEFAULT_DELAY_LEVELS, DeadLetterPolicy, DelayLevels, ErrorRule

__all__ = [
    "DEFAULT_DELAY_LEVELS",
    "REGISTRY",
    "AsyncRetryConsumer",
    "BrokerMoveError",
    "ConsumerPropertyError",
    "CounterValues",
    "DeadLetterPolicy",
    "DelayLevels",
    "ErrorRule",
    "RetryConsumer",
    "TerminateWithoutDeadLetterPolicy",
    "check_consumer_properties",
    "dead_letter_topic_name",
    "message_id_text",
    "metrics_text",
    "retry_topic_name",
    "subscribe",
]
