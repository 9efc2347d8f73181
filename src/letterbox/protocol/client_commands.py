# Builders for commands a *client* sends. The broker never emits these; they
# exist for our own raw-protocol tests and tools. Each returns framed bytes.
#
# Invariants: field choices mirror what the official client puts on the wire
# for the same operation, so tests exercise realistic frames.
from __future__ import annotations

from collections.abc import Mapping

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.framing import encode_command, encode_payload_command

T = pb.BaseCommand
_SUB = pb.CommandSubscribe
_ACK = pb.CommandAck


def connect(
    client_version: str,
    protocol_version: int,
    *,
    auth_method_name: str | None = None,
    auth_data: bytes | None = None,
    feature_flags: pb.FeatureFlags | None = None,
) -> bytes:
    body = pb.CommandConnect(
        client_version=client_version,
        protocol_version=protocol_version,
        auth_method_name=auth_method_name,
        auth_data=auth_data,
        feature_flags=feature_flags,
    )
    return encode_command(T(type=T.CONNECT, connect=body))


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    *,
    producer_name: str | None = None,
    access_mode: int = pb.Shared,
    epoch: int = 0,
    topic_epoch: int | None = None,
    initial_subscription_name: str | None = None,
    schema: pb.Schema | None = None,
    metadata: Mapping[str, str] | None = None,
) -> bytes:
    body = pb.CommandProducer(
        topic=topic,
        producer_id=producer_id,
        request_id=request_id,
        producer_name=producer_name,
        user_provided_producer_name=producer_name is not None,
        epoch=epoch,
        producer_access_mode=pb.ProducerAccessMode.ValueType(access_mode),
        topic_epoch=topic_epoch,
        initial_subscription_name=initial_subscription_name,
        schema=schema,
        metadata=[pb.KeyValue(key=k, value=v) for k, v in (metadata or {}).items()],
    )
    return encode_command(T(type=T.PRODUCER, producer=body))


def send(
    producer_id: int,
    sequence_id: int,
    num_messages: int,
    headers_and_payload: bytes,
    *,
    highest_sequence_id: int | None = None,
) -> bytes:
    body = pb.CommandSend(
        producer_id=producer_id,
        sequence_id=sequence_id,
        num_messages=num_messages,
        highest_sequence_id=highest_sequence_id,
    )
    return encode_payload_command(T(type=T.SEND, send=body), headers_and_payload)


def subscribe(
    topic: str,
    subscription: str,
    consumer_id: int,
    request_id: int,
    sub_type: int = _SUB.Exclusive,
    *,
    consumer_name: str | None = None,
    initial_position: int = _SUB.Latest,
    durable: bool = True,
    read_compacted: bool | None = None,
    start_message_id: tuple[int, int] | None = None,
    key_shared_mode: int | None = None,
    consumer_epoch: int | None = None,
) -> bytes:
    body = _SUB(
        topic=topic,
        subscription=subscription,
        subType=_SUB.SubType.ValueType(sub_type),
        consumer_id=consumer_id,
        request_id=request_id,
        consumer_name=consumer_name,
        durable=durable,
        read_compacted=read_compacted,
        initialPosition=_SUB.InitialPosition.ValueType(initial_position),
        consumer_epoch=consumer_epoch,
    )
    if start_message_id is not None:
        body.start_message_id.ledgerId, body.start_message_id.entryId = start_message_id
    if key_shared_mode is not None:
        body.keySharedMeta.keySharedMode = pb.KeySharedMode.ValueType(key_shared_mode)
    return encode_command(T(type=T.SUBSCRIBE, subscribe=body))


def flow(consumer_id: int, permits: int) -> bytes:
    body = pb.CommandFlow(consumer_id=consumer_id, messagePermits=permits)
    return encode_command(T(type=T.FLOW, flow=body))


def ack(
    consumer_id: int,
    message_ids: list[tuple[int, int]],
    ack_type: int = _ACK.Individual,
    request_id: int | None = None,
) -> bytes:
    body = _ACK(
        consumer_id=consumer_id,
        ack_type=_ACK.AckType.ValueType(ack_type),
        message_id=[pb.MessageIdData(ledgerId=lid, entryId=eid) for lid, eid in message_ids],
        request_id=request_id,
    )
    return encode_command(T(type=T.ACK, ack=body))


def lookup(topic: str, request_id: int, authoritative: bool = False) -> bytes:
    body = pb.CommandLookupTopic(topic=topic, request_id=request_id, authoritative=authoritative)
    return encode_command(T(type=T.LOOKUP, lookupTopic=body))


def partitioned_metadata(topic: str, request_id: int) -> bytes:
    body = pb.CommandPartitionedTopicMetadata(topic=topic, request_id=request_id)
    return encode_command(T(type=T.PARTITIONED_METADATA, partitionMetadata=body))


def unsubscribe(consumer_id: int, request_id: int) -> bytes:
    body = pb.CommandUnsubscribe(consumer_id=consumer_id, request_id=request_id)
    return encode_command(T(type=T.UNSUBSCRIBE, unsubscribe=body))


def redeliver_unacknowledged(
    consumer_id: int, message_ids: list[tuple[int, int]] | None = None
) -> bytes:
    body = pb.CommandRedeliverUnacknowledgedMessages(
        consumer_id=consumer_id,
        message_ids=[pb.MessageIdData(ledgerId=lid, entryId=eid) for lid, eid in message_ids or []],
    )
    return encode_command(
        T(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES, redeliverUnacknowledgedMessages=body)
    )


def get_last_message_id(consumer_id: int, request_id: int) -> bytes:
    body = pb.CommandGetLastMessageId(consumer_id=consumer_id, request_id=request_id)
    return encode_command(T(type=T.GET_LAST_MESSAGE_ID, getLastMessageId=body))
