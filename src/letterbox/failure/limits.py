# The numeric limits and defaults of letterbox's failure handling, each written
# once. Sources: the managed-service seed (delay range 1-864,000 s, the delay
# level table), the messaging-concepts seed (MultiplierRedeliveryBackoff:
# 1 s, 2 s, 4 s ... capped at 60 s), the Java client's DeadLetterPolicy.
from __future__ import annotations

MAX_DELAY_SECONDS = 864_000  # the longest delay of a retry or delayed message
MAX_DELAY_MS = MAX_DELAY_SECONDS * 1000
MIN_DELAY_MS = 1_000  # the shortest explicit reconsume_later delay

DEFAULT_BACKOFF_MIN_DELAY_MS = 1_000
DEFAULT_BACKOFF_MAX_DELAY_MS = 60_000
DEFAULT_BACKOFF_MULTIPLIER = 2.0
MAX_BACKOFF_MULTIPLIER = 100.0

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_MAX_RECONSUME_TIMES = 16  # a RetryConsumer with retry on and no dead letter policy
DEFAULT_PIPELINE_MAX_RETRIES = 3  # a Spark pipeline's RetryPolicy
