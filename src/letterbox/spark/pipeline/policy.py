# The topics of a pipeline; its retry policy is the failure core's
# RetryPolicy (re-exported here with the pipeline's names).
#
# Delays come from, in order: the handler's Retry(delay=...) or
# Retry(level=...), else the policy: an explicit list of delays (retry n
# waits delays[n-1], the last repeating), else the delay-level table (the
# seeds' `1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`) with
# level increment (retry n waits level n) or a fixed level. The router asks
# letterbox.failure.decide.
#
# Retried records wait in one topic per delay *tier*
# (`<topic>-<subscription>-RETRY-<delay>`): every message of a tier has
# about the same delay, so the messages that are due form a prefix of the
# tier's log, which is what Spark's offset model can read. A delay between
# tiers goes to the next longer tier; a delay longer than every tier goes to
# the longest one and its DELAY_TIME property holds it back until due.
from __future__ import annotations

import re
from dataclasses import dataclass

from letterbox.failure import (
    DEFAULT_DELAY_LEVELS,
    PolicyError,
    RetryPolicy,
    dead_letter_topic_name,
    retry_tier_topic_name,
)
from letterbox.spark.options import full_topic_name
from letterbox.topic_name import TopicName

SEED_DELAY_LEVELS = DEFAULT_DELAY_LEVELS

__all__ = ["SEED_DELAY_LEVELS", "PipelineTopics", "PolicyError", "RetryPolicy"]


@dataclass(frozen=True)
class PipelineTopics:
    source: str
    subscription: str
    dead_letter: str
    tiers: dict[float, str]  # delay in seconds -> tier topic

    @classmethod
    def build(
        cls, source: str, subscription: str, policy: RetryPolicy, dead_letter: str | None = None
    ) -> PipelineTopics:
        src = str(TopicName.parse(full_topic_name(source)).partitioned_parent)
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", subscription):
            raise PolicyError(f"subscription may hold letters, digits and _.- only, got {subscription!r}")
        return cls(
            source=src,
            subscription=subscription,
            dead_letter=full_topic_name(dead_letter) if dead_letter else dead_letter_topic_name(src, subscription),
            tiers={d: retry_tier_topic_name(src, subscription, d) for d in policy.tiers()},
        )
