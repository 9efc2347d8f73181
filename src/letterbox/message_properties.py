# The message property keys and values that letterbox's failure handling
# writes, in one place so the broker's dead-letter router, the Python client
# additions (retry / terminate) and the Spark pipeline stamp messages the same
# way. The names without a prefix are the seeds' (REAL_TOPIC,
# ORIGIN_MESSAGE_ID, RECONSUMETIMES, DELAY_TIME, RETRY_TOPIC); the
# DEAD_LETTER_* and delivery keys are letterbox's record of why and when.
# ORIGIN_MESSAGE_ID is written `ledger:entry:partition:batchIndex`
# (partition -1 for a non-partitioned topic, batch index -1 outside a batch).
from __future__ import annotations

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RETRY_TOPIC = "RETRY_TOPIC"
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"

DEAD_LETTER_REASON = "DEAD_LETTER_REASON"
DEAD_LETTER_TIME = "DEAD_LETTER_TIME"
DEAD_LETTER_SUBSCRIPTION = "DEAD_LETTER_SUBSCRIPTION"
DEAD_LETTER_DESCRIPTION = "DEAD_LETTER_DESCRIPTION"
DELIVERY_COUNT = "DELIVERY_COUNT"
FIRST_DELIVERY_TIME = "FIRST_DELIVERY_TIME"
LAST_DELIVERY_TIME = "LAST_DELIVERY_TIME"
ORIGIN_PUBLISH_TIME = "ORIGIN_PUBLISH_TIME"
# the attempt log of a dead letter (compact JSON, letterbox.failure.attempts) and the
# client's text about its failure (a terminate's description, else its last nack reason)
DELIVERY_ATTEMPTS = "DELIVERY_ATTEMPTS"
FAILURE_DESCRIPTION = "FAILURE_DESCRIPTION"
# ordered quarantine (failure/key_quarantine.py): the ORIGIN_MESSAGE_ID of the poisoned
# message a parked message waited behind
PARKED_BEHIND = "PARKED_BEHIND"
# the qualified class name of the error a consumer reported with its failure ("" or absent: unknown)
FAILURE_ERROR_CLASS = "FAILURE_ERROR_CLASS"
# the edits made to a message before a redrive (compact JSON list, letterbox.failure.edits):
# who, when, the sha256 of the payload it replaced; kept by every later move and redrive
EDIT_LOG = "EDIT_LOG"

REASON_MAX_REDELIVERIES = "max-redeliveries"
REASON_TERMINATED = "terminated"
REASON_EXPIRED = "expired"
REASON_PARKED_BEHIND = "parked-behind"
DEAD_LETTER_REASONS = (REASON_MAX_REDELIVERIES, REASON_TERMINATED, REASON_EXPIRED, REASON_PARKED_BEHIND)


def origin_message_id(ledger_id: int, entry_id: int, partition: int, batch_index: int) -> str:
    return f"{ledger_id}:{entry_id}:{partition}:{batch_index}"
