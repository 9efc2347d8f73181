# The property stamps of failure handling: ONE table of which keys a move
# adds and a redrive removes (the keys themselves are named in
# letterbox.message_properties).
#   ORIGIN       REAL_TOPIC ORIGIN_MESSAGE_ID ORIGIN_PUBLISH_TIME
#                added by the first move, kept by every later move and by a
#                redrive (a message moved twice keeps its first origin)
#   RETRY        RECONSUMETIMES DELAY_TIME RETRY_TOPIC
#                added by a retry move (reconsume_later, pipeline Retry)
#   DEAD_LETTER  DEAD_LETTER_REASON _TIME _SUBSCRIPTION _DESCRIPTION,
#                DELIVERY_COUNT FIRST_DELIVERY_TIME LAST_DELIVERY_TIME,
#                DELIVERY_ATTEMPTS FAILURE_DESCRIPTION (the attempt log, the client's text),
#                PARKED_BEHIND (the ordered quarantine's park)
#                added by a dead-letter move (broker, admin move, pipeline Fail)
#   EDIT         EDIT_LOG: added by a redrive that edits the message (failure/edits.py),
#                kept by every later move and redrive, like the origin
#   REDRIVE_REMOVES = RETRY | DEAD_LETTER: a redriven message starts over, with
#                no attempt count and no dead-letter record, but knows its origin.
# Invariant: FAILURE_KEYS = ORIGIN | EDIT | RETRY | DEAD_LETTER; every other property
# is the user's and every move and redrive keeps it.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from letterbox.failure.attempts import (
    Attempt,
    attempts_property,
    attempts_property_rows,
    clip_reason,
    last_reason,
)
from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DEAD_LETTER_REASON,
    DEAD_LETTER_SUBSCRIPTION,
    DEAD_LETTER_TIME,
    DELAY_TIME,
    DELIVERY_ATTEMPTS,
    DELIVERY_COUNT,
    EDIT_LOG,
    FAILURE_DESCRIPTION,
    FIRST_DELIVERY_TIME,
    LAST_DELIVERY_TIME,
    ORIGIN_MESSAGE_ID,
    ORIGIN_PUBLISH_TIME,
    PARKED_BEHIND,
    REAL_TOPIC,
    RECONSUMETIMES,
    RETRY_TOPIC,
)

ORIGIN_STAMPS = frozenset({REAL_TOPIC, ORIGIN_MESSAGE_ID, ORIGIN_PUBLISH_TIME})
RETRY_STAMPS = frozenset({RECONSUMETIMES, DELAY_TIME, RETRY_TOPIC})
DEAD_LETTER_STAMPS = frozenset({
    DEAD_LETTER_REASON, DEAD_LETTER_TIME, DEAD_LETTER_SUBSCRIPTION, DEAD_LETTER_DESCRIPTION,
    DELIVERY_COUNT, FIRST_DELIVERY_TIME, LAST_DELIVERY_TIME, DELIVERY_ATTEMPTS, FAILURE_DESCRIPTION,
    PARKED_BEHIND,
})
EDIT_STAMPS = frozenset({EDIT_LOG})
REDRIVE_REMOVES = RETRY_STAMPS | DEAD_LETTER_STAMPS
FAILURE_KEYS = ORIGIN_STAMPS | EDIT_STAMPS | REDRIVE_REMOVES


def user_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The properties a user set: every failure stamp removed."""
    return {k: v for k, v in props.items() if k not in FAILURE_KEYS}


def redriven_properties(props: Mapping[str, str]) -> dict[str, str]:
    """What a message carries into a fresh start (a redrive; the pipeline's next
    move): the user's properties and its origin, no attempt or dead-letter stamps."""
    return {k: v for k, v in props.items() if k not in REDRIVE_REMOVES}


def reconsume_times(props: Mapping[str, str]) -> int:
    """The retries a message has had (RECONSUMETIMES; 0 when absent or unreadable)."""
    try:
        return max(int(props.get(RECONSUMETIMES) or "0"), 0)
    except ValueError:
        return 0


def origin_stamps(real_topic: str, origin_message_id: str) -> dict[str, str]:
    return {REAL_TOPIC: real_topic, ORIGIN_MESSAGE_ID: origin_message_id}


def retry_stamps(times: int, delay_ms: int, retry_topic: str) -> dict[str, str]:
    """What a retry move adds besides the origin: the attempt, its delay, where it waits."""
    return {RECONSUMETIMES: str(times), DELAY_TIME: str(delay_ms), RETRY_TOPIC: retry_topic}


def dead_letter_stamps(
    reason: str,
    now_ms: int,
    subscription: str,
    delivery_count: int | None = None,
    first_delivery_ms: int = 0,
    last_delivery_ms: int = 0,
    description: str | None = None,
    attempts: Sequence[Attempt] = (),
    attempt_rows: Sequence[Sequence[Any]] | None = None,
) -> dict[str, str]:
    """What a dead-letter move adds besides the origin: why, when, where from, its deliveries,
    its attempt log (DELIVERY_ATTEMPTS) and the client's text (FAILURE_DESCRIPTION: the
    description, else the latest reason in the log). `attempt_rows`: the log as its stored
    rows instead of `attempts` (the same stamps)."""
    out = {DEAD_LETTER_REASON: reason, DEAD_LETTER_TIME: str(now_ms), DEAD_LETTER_SUBSCRIPTION: subscription}
    if delivery_count is not None:
        out[DELIVERY_COUNT] = str(delivery_count)
    if first_delivery_ms:
        out[FIRST_DELIVERY_TIME] = str(first_delivery_ms)
        out[LAST_DELIVERY_TIME] = str(last_delivery_ms)
    if description:
        out[DEAD_LETTER_DESCRIPTION] = clip_reason(description) or ""
    if attempt_rows is not None:
        if attempt_rows:
            out[DELIVERY_ATTEMPTS] = attempts_property_rows(attempt_rows)
        latest = next((r[5] for r in reversed(attempt_rows) if r[5]), None)
    else:
        if attempts:
            out[DELIVERY_ATTEMPTS] = attempts_property(list(attempts))
        latest = last_reason(list(attempts))
    text = clip_reason(description) or latest
    if text:
        out[FAILURE_DESCRIPTION] = text
    return out
