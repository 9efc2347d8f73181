# Builders for every command the broker sends. Each returns a complete,
# framed byte string ready to be written to the transport.
#
# Invariants: builders never mutate their arguments; error codes are Pulsar
# ServerError numbers (plain ints or IntEnums are accepted); message() is the
# dispatch hot path and only concatenates the stored headers_and_payload.
from __future__ import annotations

import struct
from collections.abc import Iterable

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, encode_command
from letterbox.protocol.receipts import message as message  # hand-encoded: written per message
from letterbox.protocol.receipts import send_receipt as send_receipt  # hand-encoded too

T = pb.BaseCommand
# Highest protocol version we speak; negotiate min(client, PROTOCOL_VERSION).
PROTOCOL_VERSION = 21
_ServerError = pb.ServerError.ValueType
_HEADER = struct.Struct(">II")
_I64 = struct.Struct(">q")


def connected(
    server_version: str,
    protocol_version: int,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    *,
    supports_auth_refresh: bool = False,
    supports_broker_entry_metadata: bool = False,
    supports_partial_producer: bool = False,
    supports_topic_watchers: bool = False,
    supports_get_partitioned_metadata_without_auto_creation: bool = False,
) -> bytes:
    flags = pb.FeatureFlags(
        supports_auth_refresh=supports_auth_refresh,
        supports_broker_entry_metadata=supports_broker_entry_metadata,
        supports_partial_producer=supports_partial_producer,
        supports_topic_watchers=supports_topic_watchers,
        supports_get_partitioned_metadata_without_auto_creation=(
            supports_get_partitioned_metadata_without_auto_creation
        ),
    )
    body = pb.CommandConnected(
        server_version=server_version,
        protocol_version=protocol_version,
        max_message_size=max_message_size,
        feature_flags=flags,
    )
    return encode_command(T(type=T.CONNECTED, connected=body))


_PING = encode_command(T(type=T.PING, ping=pb.CommandPing()))
_PONG = encode_command(T(type=T.PONG, pong=pb.CommandPong()))


def ping() -> bytes:
    return _PING


def pong() -> bytes:
    return _PONG


def success(request_id: int) -> bytes:
    return encode_command(T(type=T.SUCCESS, success=pb.CommandSuccess(request_id=request_id)))


def error(request_id: int, code: int, message: str) -> bytes:
    body = pb.CommandError(request_id=request_id, error=_ServerError(code), message=message)
    return encode_command(T(type=T.ERROR, error=body))


# request id of an ERROR that answers no request (a refused CONNECT): Pulsar's -1 as uint64
NO_REQUEST_ID = (1 << 64) - 1


def auth_challenge(server_version: str, method: str, data: bytes, protocol_version: int) -> bytes:
    """Ask the client for fresh credentials (Pulsar sends data b"refresh" on expiry)."""
    body = pb.CommandAuthChallenge(
        server_version=server_version,
        challenge=pb.AuthData(auth_method_name=method, auth_data=data),
        protocol_version=protocol_version,
    )
    return encode_command(T(type=T.AUTH_CHALLENGE, authChallenge=body))


# ---------------------------------------------------------------- producers


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    schema_version: bytes = b"",
    topic_epoch: int | None = None,
    producer_ready: bool = True,
) -> bytes:
    body = pb.CommandProducerSuccess(
        request_id=request_id,
        producer_name=producer_name,
        last_sequence_id=last_sequence_id,
        schema_version=schema_version,
        topic_epoch=topic_epoch,
        producer_ready=producer_ready,
    )
    return encode_command(T(type=T.PRODUCER_SUCCESS, producer_success=body))


def send_error(producer_id: int, sequence_id: int, code: int, message: str) -> bytes:
    body = pb.CommandSendError(
        producer_id=producer_id,
        sequence_id=sequence_id,
        error=_ServerError(code),
        message=message,
    )
    return encode_command(T(type=T.SEND_ERROR, send_error=body))


# Broker-initiated closes carry Pulsar's "no request" id: -1 as a uint64.
NO_REQUEST_ID = 2**64 - 1


def close_producer(producer_id: int, request_id: int = NO_REQUEST_ID) -> bytes:
    body = pb.CommandCloseProducer(producer_id=producer_id, request_id=request_id)
    return encode_command(T(type=T.CLOSE_PRODUCER, close_producer=body))


# ---------------------------------------------------------------- consumers


def active_consumer_change(consumer_id: int, is_active: bool) -> bytes:
    body = pb.CommandActiveConsumerChange(consumer_id=consumer_id, is_active=is_active)
    return encode_command(T(type=T.ACTIVE_CONSUMER_CHANGE, active_consumer_change=body))


def close_consumer(consumer_id: int, request_id: int = NO_REQUEST_ID) -> bytes:
    body = pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=request_id)
    return encode_command(T(type=T.CLOSE_CONSUMER, close_consumer=body))


def reached_end_of_topic(consumer_id: int) -> bytes:
    body = pb.CommandReachedEndOfTopic(consumer_id=consumer_id)
    return encode_command(T(type=T.REACHED_END_OF_TOPIC, reachedEndOfTopic=body))


def ack_response(
    consumer_id: int,
    request_id: int,
    error: int | None = None,
    message: str | None = None,
) -> bytes:
    body = pb.CommandAckResponse(consumer_id=consumer_id, request_id=request_id, message=message)
    if error is not None:
        body.error = _ServerError(error)
    return encode_command(T(type=T.ACK_RESPONSE, ackResponse=body))


def get_last_message_id_response(
    request_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int = -1,
    batch_index: int = -1,
    *,
    mark_delete: tuple[int, int] | None = None,
) -> bytes:
    """mark_delete is the subscription's (ledger_id, entry_id), if durable."""
    body = pb.CommandGetLastMessageIdResponse(
        request_id=request_id,
        last_message_id=pb.MessageIdData(
            ledgerId=ledger_id, entryId=entry_id, partition=partition, batch_index=batch_index
        ),
    )
    if mark_delete is not None:
        pos = body.consumer_mark_delete_position
        pos.ledgerId, pos.entryId = mark_delete
    return encode_command(T(type=T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=body))


def consumer_stats_response(
    request_id: int,
    *,
    consumer_name: str | None = None,
    available_permits: int | None = None,
    unacked_messages: int | None = None,
    msg_backlog: int | None = None,
    blocked_on_unacked: bool | None = None,
    sub_type: str | None = None,
    address: str | None = None,
    connected_since: str | None = None,
    msg_rate_out: float | None = None,
    msg_throughput_out: float | None = None,
) -> bytes:
    body = pb.CommandConsumerStatsResponse(
        request_id=request_id,
        consumerName=consumer_name,
        availablePermits=available_permits,
        unackedMessages=unacked_messages,
        msgBacklog=msg_backlog,
        blockedConsumerOnUnackedMsgs=blocked_on_unacked,
        type=sub_type,
        address=address,
        connectedSince=connected_since,
        msgRateOut=msg_rate_out,
        msgThroughputOut=msg_throughput_out,
    )
    return encode_command(T(type=T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=body))


def consumer_stats_error(request_id: int, code: int, message: str) -> bytes:
    body = pb.CommandConsumerStatsResponse(
        request_id=request_id, error_code=_ServerError(code), error_message=message
    )
    return encode_command(T(type=T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=body))


# ---------------------------------------------------------------- lookup / discovery

_LOOKUP = pb.CommandLookupTopicResponse
_PARTITIONS = pb.CommandPartitionedTopicMetadataResponse


def lookup_response(
    request_id: int,
    broker_url: str,
    *,
    broker_url_tls: str | None = None,
    authoritative: bool = True,
    response: int = _LOOKUP.Connect,
    proxy_through_service_url: bool = False,
) -> bytes:
    body = _LOOKUP(
        request_id=request_id,
        brokerServiceUrl=broker_url,
        brokerServiceUrlTls=broker_url_tls,
        authoritative=authoritative,
        response=_LOOKUP.LookupType.ValueType(response),
        proxy_through_service_url=proxy_through_service_url,
    )
    return encode_command(T(type=T.LOOKUP_RESPONSE, lookupTopicResponse=body))


def lookup_error(request_id: int, code: int, message: str) -> bytes:
    body = _LOOKUP(
        request_id=request_id, response=_LOOKUP.Failed, error=_ServerError(code), message=message
    )
    return encode_command(T(type=T.LOOKUP_RESPONSE, lookupTopicResponse=body))


def partitioned_metadata_response(request_id: int, partitions: int) -> bytes:
    body = _PARTITIONS(request_id=request_id, partitions=partitions, response=_PARTITIONS.Success)
    return encode_command(T(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=body))


def partitioned_metadata_error(request_id: int, code: int, message: str) -> bytes:
    body = _PARTITIONS(
        request_id=request_id,
        response=_PARTITIONS.Failed,
        error=_ServerError(code),
        message=message,
    )
    return encode_command(T(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=body))


def get_topics_of_namespace_response(
    request_id: int,
    topics: Iterable[str],
    filtered: bool = False,
    *,
    topics_hash: str | None = None,
    changed: bool = True,
) -> bytes:
    body = pb.CommandGetTopicsOfNamespaceResponse(
        request_id=request_id,
        topics=topics if changed else (),
        filtered=filtered,
        topics_hash=topics_hash,
        changed=changed,
    )
    return encode_command(
        T(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=body)
    )


# ---------------------------------------------------------------- schema registry


def schema_version(version: int) -> bytes:
    """Pulsar encodes a schema version as an 8-byte big-endian signed long."""
    return _I64.pack(version)



def get_schema_response(request_id: int, schema: pb.Schema, schema_version: bytes) -> bytes:
    body = pb.CommandGetSchemaResponse(
        request_id=request_id, schema=schema, schema_version=schema_version
    )
    return encode_command(T(type=T.GET_SCHEMA_RESPONSE, getSchemaResponse=body))


def get_schema_error(request_id: int, code: int, message: str) -> bytes:
    body = pb.CommandGetSchemaResponse(
        request_id=request_id, error_code=_ServerError(code), error_message=message
    )
    return encode_command(T(type=T.GET_SCHEMA_RESPONSE, getSchemaResponse=body))


def get_or_create_schema_response(request_id: int, schema_version: bytes) -> bytes:
    body = pb.CommandGetOrCreateSchemaResponse(request_id=request_id, schema_version=schema_version)
    return encode_command(T(type=T.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=body))


def get_or_create_schema_error(request_id: int, code: int, message: str) -> bytes:
    body = pb.CommandGetOrCreateSchemaResponse(
        request_id=request_id, error_code=_ServerError(code), error_message=message
    )
    return encode_command(T(type=T.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=body))
