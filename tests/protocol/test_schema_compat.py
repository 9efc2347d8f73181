"""The generated descriptor must match Pulsar's wire schema for fields that
the official client depends on (numbers, names, defaults, enum values)."""
from __future__ import annotations

import pytest

from letterbox.protocol import pb


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("BaseCommand", "type", 1),
        ("BaseCommand", "connect", 2),
        ("BaseCommand", "send", 6),
        ("BaseCommand", "message", 9),
        ("BaseCommand", "redeliverUnacknowledgedMessages", 20),
        ("BaseCommand", "lookupTopicResponse", 24),
        ("BaseCommand", "active_consumer_change", 31),
        ("BaseCommand", "ackResponse", 38),
        ("BaseCommand", "getOrCreateSchemaResponse", 40),
        ("BaseCommand", "tcClientConnectResponse", 63),
        ("BaseCommand", "topicMigrated", 68),
        ("MessageMetadata", "num_messages_in_batch", 11),
        ("MessageMetadata", "ordering_key", 18),
        ("MessageMetadata", "txnid_least_bits", 22),
        ("MessageMetadata", "highest_sequence_id", 24),
        ("MessageMetadata", "null_partition_key", 30),
        ("MessageIdData", "ledgerId", 1),
        ("MessageIdData", "ack_set", 5),
        ("MessageIdData", "first_chunk_message_id", 7),
        ("CommandMessage", "ack_set", 4),
        ("CommandMessage", "consumer_epoch", 5),
        ("CommandSubscribe", "subType", 3),
        ("CommandSubscribe", "initialPosition", 13),
        ("CommandSubscribe", "keySharedMeta", 17),
        ("CommandSubscribe", "consumer_epoch", 19),
        ("CommandProducer", "producer_access_mode", 10),
        ("CommandProducer", "initial_subscription_name", 13),
        ("CommandAck", "request_id", 8),
        ("CommandFlow", "messagePermits", 2),
        ("CommandUnsubscribe", "force", 3),
        ("CommandConnected", "feature_flags", 4),
        ("CommandLookupTopicResponse", "request_id", 4),
        ("CommandConsumerStats", "consumer_id", 4),
        ("Schema", "schema_data", 3),
    ],
)
def test_field_numbers(message: str, field: str, number: int) -> None:
    desc = getattr(pb, message).DESCRIPTOR
    assert desc.fields_by_name[field].number == number


def test_base_command_body_number_equals_type_value() -> None:
    desc = pb.BaseCommand.DESCRIPTOR
    type_values = {v.number for v in desc.enum_types_by_name["Type"].values}
    body_numbers = {f.number for f in desc.fields if f.name != "type"}
    assert type_values == body_numbers
    assert type_values == set(range(2, 41)) | set(range(50, 69))


def test_enums_and_defaults() -> None:
    assert pb.BaseCommand.SEND == 6 and pb.BaseCommand.GET_OR_CREATE_SCHEMA_RESPONSE == 40
    assert pb.ServerError.Value("ProducerFenced") == 25
    assert pb.ProtocolVersion.Value("v21") == 21
    assert pb.CompressionType.Value("SNAPPY") == 4
    assert pb.ProducerAccessMode.Value("ExclusiveWithFencing") == 3
    assert pb.CommandSubscribe.Key_Shared == 3
    assert pb.CommandLookupTopicResponse.Connect == 1
    assert pb.Schema.AutoConsume == -3
    assert pb.MessageIdData().partition == -1
    assert pb.MessageIdData().batch_index == -1
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandProducerSuccess().producer_ready is True
    assert pb.CommandSubscribe().durable is True
    assert pb.CommandSubscribe().force_topic_creation is True
    assert pb.MessageMetadata().num_messages_in_batch == 1
    assert pb.CommandGetTopicsOfNamespaceResponse().changed is True
    assert pb.CommandPartitionedTopicMetadata().metadata_auto_creation_enabled is True


def test_repeated_scalars_are_unpacked_like_pulsar() -> None:
    # proto2 without [packed=true]: each ack_set element carries its own tag.
    raw = pb.CommandMessage(consumer_id=1, ack_set=[1, 2]).SerializePartialToString()
    assert raw.count(b"\x20") == 2


def test_package_is_ours() -> None:
    assert pb.BaseCommand.DESCRIPTOR.full_name == "letterbox.pulsar.BaseCommand"
