# Topic naming of the failure topics, on canonical topic names
# (`persistent://tenant/namespace/local`, maybe with `-partition-N`), as text:
# - dead letter topic `<topic>-<subscription>-DLQ` (PIP-22),
# - retry letter topic `<topic>-<subscription>-RETRY` (the managed-service seed),
# - the Spark pipeline's retry tiers `<topic>-<subscription>-RETRY-<delay>`,
# always of the partitioned parent (one DLQ per subscription, not per
# partition), in the source topic's namespace.
# topic_role tells a failure topic from a source topic by these suffixes; the
# guards of decide.py use it so that namespace policies never dead-letter a
# dead letter or retry topic.
from __future__ import annotations

import enum
import re

from letterbox.failure.durations import duration_label
from letterbox.failure.errors import PolicyError

PARTITION_SUFFIX = "-partition-"
DLQ_SUFFIX = "-DLQ"
RETRY_SUFFIX = "-RETRY"
# the broker's own durable subscription on a dead letter topic: what it marks there is handled
# (redriven or purged); it counts toward no subscription limit
HANDLED_SUBSCRIPTION = "letterbox-dlq-handled"
_PARTITION_RE = re.compile(r"-partition-\d+$")
_TIER_RE = re.compile(r"-RETRY-\d+(?:ms|s|m|h)$")


class TopicRole(enum.Enum):
    SOURCE = "source"
    DEAD_LETTER = "dead-letter"
    RETRY = "retry"


def partitioned_parent(topic: str) -> str:
    """`...-partition-3` -> the partitioned topic's name; any other name unchanged."""
    return _PARTITION_RE.sub("", topic)


def dead_letter_topic_name(topic: str, subscription: str) -> str:
    """`<topic>-<subscription>-DLQ` of a canonical topic name (its partitioned parent's)."""
    return f"{partitioned_parent(topic)}-{subscription}{DLQ_SUFFIX}"


def retry_topic_name(topic: str, subscription: str) -> str:
    """`<topic>-<subscription>-RETRY` of a canonical topic name (its partitioned parent's)."""
    return f"{partitioned_parent(topic)}-{subscription}{RETRY_SUFFIX}"


def retry_tier_topic_name(topic: str, subscription: str, delay_seconds: float) -> str:
    """The pipeline's retry tier for one delay: `<topic>-<subscription>-RETRY-5s`."""
    return f"{retry_topic_name(topic, subscription)}-{duration_label(delay_seconds)}"


def topic_role(topic: str) -> TopicRole:
    """What a topic is for, by its name (a partition is what its parent is)."""
    name = partitioned_parent(topic)
    if name.endswith(DLQ_SUFFIX):
        return TopicRole.DEAD_LETTER
    if name.endswith(RETRY_SUFFIX) or _TIER_RE.search(name):
        return TopicRole.RETRY
    return TopicRole.SOURCE


def dead_letter_target(topic: str, subscription: str, configured: str | None) -> str:
    """Where a dead-letter move of `topic`/`subscription` goes: the configured topic,
    else the default name. Refuses (PolicyError) to name a dead letter topic of a
    dead letter topic: from a dead letter topic only a named target is used."""
    if configured:
        return configured
    if topic_role(topic) is TopicRole.DEAD_LETTER:
        raise PolicyError(
            f"{topic} is a dead letter topic: its messages are dead-lettered only to a topic named "
            "explicitly (deadLetterTopic / letterbox.dlq.topic), never to a dead letter topic of its own"
        )
    return dead_letter_topic_name(topic, subscription)
