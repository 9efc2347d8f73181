"""The fields of Apache Pulsar's stats objects that letterbox has no feature or counter for.

Pulsar's TopicStats, SubscriptionStats, ConsumerStats, PublisherStats, PersistentTopicInternalStats
and CursorStats carry fields for transactions, tiered storage, replication, entry filters,
dispatch-throttling events, Key_Shared draining hashes and a few timestamps letterbox does not
keep. A script written against Pulsar reads them, so every stats answer carries them with the
value Pulsar gives when the feature is unused or the event never happened (-1, 0, false, {}).
Invariants: nothing here overrides a field letterbox computes (stats.py merges these first);
every answer gets its own copies of the nested values (`fresh`), so no answer shares a dict or
list with another."""
from __future__ import annotations

import copy
from typing import Any


def fresh(fields: dict[str, Any]) -> dict[str, Any]:
    """A copy of `fields` whose nested dicts and lists are the answer's own."""
    return {k: copy.deepcopy(v) if isinstance(v, dict | list) else v for k, v in fields.items()}

TOPIC: dict[str, Any] = {
    "systemTopicBytesInCounter": 0,
    "bytesOutInternalCounter": 0,
    "backlogQuotaLimitSize": -1,
    "backlogQuotaLimitTime": -1,
    "oldestBacklogMessageAgeSeconds": -1,
    "publishRateLimitedTimes": 0,
    "earliestMsgPublishTimeInBacklogs": 0,
    "lastOffloadLedgerId": 0,
    "lastOffloadSuccessTimeStamp": 0,
    "lastOffloadFailureTimeStamp": 0,
    "ongoingTxnCount": 0,
    "abortedTxnCount": 0,
    "committedTxnCount": 0,
    "nonContiguousDeletedMessagesRangesSerializedSize": 0,
    "delayedMessageIndexSizeInBytes": 0,
    "compaction": {"lastCompactionRemovedEventCount": 0, "lastCompactionSucceedTimestamp": 0,
                   "lastCompactionFailedTimestamp": 0, "lastCompactionDurationTimeInMills": 0},
}

SUBSCRIPTION: dict[str, Any] = {
    "messageAckRate": 0.0,
    "chunkedMessageRate": 0.0,
    "earliestMsgPublishTimeInBacklog": 0,
    "msgInReplay": 0,
    "lastExpireTimestamp": 0,
    "lastConsumedFlowTimestamp": 0,
    "lastConsumedTimestamp": 0,
    "lastAckedTimestamp": 0,
    "lastMarkDeleteAdvancedTimestamp": 0,
    "allowOutOfOrderDelivery": False,
    "consumersAfterMarkDeletePosition": {},
    "drainingHashesCount": 0,
    "drainingHashesClearedTotal": 0,
    "drainingHashesUnackedMessages": 0,
    "nonContiguousDeletedMessagesRangesSerializedSize": 0,
    "delayedMessageIndexSizeInBytes": 0,
    "subscriptionProperties": {},
    "filterProcessedMsgCount": 0,
    "filterAcceptedMsgCount": 0,
    "filterRejectedMsgCount": 0,
    "filterRescheduledMsgCount": 0,
    "dispatchThrottledMsgEventsBySubscriptionLimit": 0,
    "dispatchThrottledBytesEventsBySubscriptionLimit": 0,
    "dispatchThrottledMsgEventsByTopicLimit": 0,
    "dispatchThrottledBytesEventsByTopicLimit": 0,
    "dispatchThrottledMsgEventsByBrokerLimit": 0,
    "dispatchThrottledBytesEventsByBrokerLimit": 0,
    "replicated": False,
}

CONSUMER: dict[str, Any] = {
    "messageAckRate": 0.0,
    "chunkedMessageRate": 0.0,
    "avgMessagesPerEntry": 1,
    "drainingHashesCount": 0,
    "drainingHashesClearedTotal": 0,
    "drainingHashesUnackedMessages": 0,
    "connectedSince": "",
    "clientVersion": "",
    "lastAckedTimestamp": 0,
    "lastConsumedTimestamp": 0,
    "lastConsumedFlowTimestamp": 0,
    "lastAckedTime": "1970-01-01T00:00:00Z",
    "lastConsumedTime": "1970-01-01T00:00:00Z",
}

PUBLISHER: dict[str, Any] = {
    "chunkedMessageRate": 0.0,
    "supportsPartialProducer": False,
    "connectedSince": "",
    "clientVersion": "",
}

INTERNAL: dict[str, Any] = {
    "schemaLedgers": [],
    "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                        "underReplicated": False},
}

CURSOR: dict[str, Any] = {
    "subscriptionHavePendingRead": False,
    "subscriptionHavePendingReplayRead": False,
}
