"""letterbox's failure core: the one place that decides redeliver, delay or dead-letter.

Pure and synchronous (no asyncio, no I/O); it imports nothing from broker/,
admin/, client/, spark/ or cli. Everything that handles a failed message calls
it: the broker's subscription (nack, ack timeout, redeliver-all, consumer gone,
delayed dispatch), the admin expiry and the namespace TTL, the admin/CLI and
Spark redrive (stamps), letterbox.client's RetryConsumer (reconsume_later,
terminate, naming) and the Spark pipeline (retry, fail, tiers).

- policies.py   DeadLetterPolicy, Backoff, DelayLevels, RetryPolicy, FailurePolicy
- limits.py     MAX_DELAY_SECONDS (864,000 s) and the other limits and defaults
- durations.py  the one duration parser (`5s`, `500ms`, `2m`) and labels
- naming.py     `<topic>-<sub>-DLQ`, `<topic>-<sub>-RETRY`, retry tiers, topic_role
- stamps.py     what a move adds and a redrive removes (one table)
- fingerprint.py  a dead letter's failure group (reason, error class, normalised text) and its id
- attempts.py   Attempt and its endings (mapped from the events), the attempt log's rows,
                DELIVERY_ATTEMPTS
- consumer_properties.py  the `letterbox.*` consumer properties that set a policy
- decide.py     decide(state, event, policy, now) -> Deliver | DeliverAt | DeadLetter
                | Acknowledge | Refuse, for every event; decide_redeliveries(...) the same
                for all the messages of one redelivery request at once

How to check that no decision lives elsewhere (this should print nothing):

    grep -rnE 'max_redeliver_count *[<>]|[<>]=? *[A-Za-z_.]*max_(redeliver_count|retries|reconsume_times)\\b|\\.(delay_ms|policy_delay|level_delay|for_attempt)\\(|864_?000|deliver_at[A-Za-z_]* *> *now|delay[A-Za-z_]* *= *.*in \\(SHARED, KEY_SHARED\\)|count\\([a-z_]+\\) *> *limit' src/letterbox | grep -v '^src/letterbox/failure/'

tests/unit/test_failure_boundaries.py runs the same check.
"""
from letterbox.failure.consumer_properties import (
    declares_policy,
    policy_from_consumer_properties,
)
from letterbox.failure.decide import (
    Acknowledge,
    AckTimeout,
    ConsumerGone,
    DeadLetter,
    Deliver,
    DeliverAt,
    DeliveryState,
    Dispatch,
    Event,
    Expired,
    Nack,
    Outcome,
    PipelineFail,
    PipelineRetry,
    ReconsumeLater,
    RedeliverAll,
    Refuse,
    SubscriptionType,
    Terminate,
    dead_letter_policy_for,
    decide,
    decide_redeliveries,
)
from letterbox.failure.durations import duration_label, parse_duration_ms, parse_seconds
from letterbox.failure.errors import PolicyError
from letterbox.failure.fingerprint import FailureGroup, failure_group, fingerprint
from letterbox.failure.limits import (
    DEFAULT_DELAY_LEVELS,
    DEFAULT_MAX_RECONSUME_TIMES,
    MAX_DELAY_MS,
    MAX_DELAY_SECONDS,
    MIN_DELAY_MS,
)
from letterbox.failure.naming import (
    HANDLED_SUBSCRIPTION,
    TopicRole,
    dead_letter_target,
    dead_letter_topic_name,
    retry_tier_topic_name,
    retry_topic_name,
    topic_role,
)
from letterbox.failure.policies import (
    Backoff,
    DeadLetterPolicy,
    DelayLevels,
    FailurePolicy,
    PolicyOrigin,
    RetryPolicy,
    explicit_delay_ms,
)
from letterbox.failure.stamps import (
    DEAD_LETTER_STAMPS,
    FAILURE_KEYS,
    ORIGIN_STAMPS,
    REDRIVE_REMOVES,
    RETRY_STAMPS,
    dead_letter_stamps,
    origin_stamps,
    reconsume_times,
    redriven_properties,
    retry_stamps,
    user_properties,
)

__all__ = [
    "DEAD_LETTER_STAMPS",
    "DEFAULT_DELAY_LEVELS",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "FAILURE_KEYS",
    "HANDLED_SUBSCRIPTION",
    "MAX_DELAY_MS",
    "MAX_DELAY_SECONDS",
    "MIN_DELAY_MS",
    "ORIGIN_STAMPS",
    "REDRIVE_REMOVES",
    "RETRY_STAMPS",
    "AckTimeout",
    "Acknowledge",
    "Backoff",
    "ConsumerGone",
    "DeadLetter",
    "DeadLetterPolicy",
    "DelayLevels",
    "Deliver",
    "DeliverAt",
    "DeliveryState",
    "Dispatch",
    "Event",
    "Expired",
    "FailureGroup",
    "FailurePolicy",
    "Nack",
    "Outcome",
    "PipelineFail",
    "PipelineRetry",
    "PolicyError",
    "PolicyOrigin",
    "ReconsumeLater",
    "RedeliverAll",
    "Refuse",
    "RetryPolicy",
    "SubscriptionType",
    "Terminate",
    "TopicRole",
    "dead_letter_policy_for",
    "dead_letter_stamps",
    "dead_letter_target",
    "dead_letter_topic_name",
    "decide",
    "decide_redeliveries",
    "declares_policy",
    "duration_label",
    "explicit_delay_ms",
    "failure_group",
    "fingerprint",
    "origin_stamps",
    "parse_duration_ms",
    "parse_seconds",
    "policy_from_consumer_properties",
    "reconsume_times",
    "redriven_properties",
    "retry_stamps",
    "retry_tier_topic_name",
    "retry_topic_name",
    "topic_role",
    "user_properties",
]
