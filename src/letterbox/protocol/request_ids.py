# Which field of a BaseCommand holds a command's body, and the request id it carries (if
# any): how an error reply is matched to the request it answers.
from __future__ import annotations

from typing import Any

from letterbox.protocol import pulsar_api_pb2 as pb

T = pb.BaseCommand


def request_id_of(cmd: pb.BaseCommand) -> int | None:
    """The request id of whatever command this is, if it carries one."""
    try:
        name = T.Type.Name(cmd.type).lower()
    except ValueError:
        return None
    field = _FIELD_FOR_TYPE.get(name, name)
    try:
        body: Any = getattr(cmd, field)
    except AttributeError:
        return None
    if body is not None and "request_id" in body.DESCRIPTOR.fields_by_name and body.HasField("request_id"):
        return int(body.request_id)
    return None


_FIELD_FOR_TYPE = {
    "lookup": "lookupTopic",
    "lookup_response": "lookupTopicResponse",
    "partitioned_metadata": "partitionMetadata",
    "partitioned_metadata_response": "partitionMetadataResponse",
    "redeliver_unacknowledged_messages": "redeliverUnacknowledgedMessages",
    "close_producer": "close_producer",
    "close_consumer": "close_consumer",
    "consumer_stats": "consumerStats",
    "get_last_message_id": "getLastMessageId",
    "get_topics_of_namespace": "getTopicsOfNamespace",
    "get_schema": "getSchema",
    "get_or_create_schema": "getOrCreateSchema",
    "active_consumer_change": "active_consumer_change",
    "reached_end_of_topic": "reachedEndOfTopic",
    "auth_challenge": "authChallenge",
    "auth_response": "authResponse",
    "ack_response": "ackResponse",
    "new_txn": "newTxn",
    "add_partition_to_txn": "addPartitionToTxn",
    "add_subscription_to_txn": "addSubscriptionToTxn",
    "end_txn": "endTxn",
    "end_txn_on_partition": "endTxnOnPartition",
    "end_txn_on_subscription": "endTxnOnSubscription",
    "tc_client_connect_request": "tcClientConnectRequest",
    "watch_topic_list": "watchTopicList",
    "watch_topic_list_close": "watchTopicListClose",
    "topic_migrated": "topicMigrated",
}
