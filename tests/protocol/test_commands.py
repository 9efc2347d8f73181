"""Every builder's output decodes back to the command and fields it was given."""
from __future__ import annotations

import pytest

from letterbox.protocol import (
    FrameDecoder,
    build_headers_and_payload,
    client_commands,
    commands,
    parse_headers_and_payload,
    pb,
    receipts,
)

T = pb.BaseCommand


def decode(raw: bytes) -> tuple[pb.BaseCommand, bytes | None]:
    d = FrameDecoder()
    d.feed(raw)
    frame = d.next_frame()
    assert frame is not None
    assert d.next_frame() is None and d.buffered == 0  # exactly one frame
    return frame.command, frame.headers_and_payload


def test_connected() -> None:
    cmd, _ = decode(commands.connected("letterbox-0.1", 21, 1024, supports_auth_refresh=True))
    assert cmd.type == T.CONNECTED
    c = cmd.connected
    assert (c.server_version, c.protocol_version, c.max_message_size) == ("letterbox-0.1", 21, 1024)
    assert c.feature_flags.supports_auth_refresh
    assert c.feature_flags.HasField("supports_broker_entry_metadata")
    assert not c.feature_flags.supports_broker_entry_metadata


def test_ping_pong() -> None:
    assert decode(commands.ping())[0].type == T.PING
    assert decode(commands.pong())[0].type == T.PONG


def test_success_and_error() -> None:
    assert decode(commands.success(5))[0].success.request_id == 5
    cmd, _ = decode(commands.error(6, pb.TopicNotFound, "nope"))
    assert (cmd.type, cmd.error.request_id, cmd.error.error, cmd.error.message) == (
        T.ERROR, 6, pb.TopicNotFound, "nope"
    )


def test_producer_success() -> None:
    cmd, _ = decode(commands.producer_success(1, "prod-a", 17, b"\x00\x01", topic_epoch=3))
    ps = cmd.producer_success
    assert (ps.request_id, ps.producer_name, ps.last_sequence_id) == (1, "prod-a", 17)
    assert ps.schema_version == b"\x00\x01" and ps.topic_epoch == 3 and ps.producer_ready
    cmd, _ = decode(commands.producer_success(2, "p", -1, b"", producer_ready=False))
    assert not cmd.producer_success.producer_ready
    assert not cmd.producer_success.HasField("topic_epoch")


def test_send_receipt_and_error() -> None:
    cmd, _ = decode(commands.send_receipt(1, 2, 30, 40, highest_sequence_id=9))
    r = cmd.send_receipt
    assert (r.producer_id, r.sequence_id, r.message_id.ledgerId, r.message_id.entryId) == (1, 2, 30, 40)
    assert r.highest_sequence_id == 9
    cmd, _ = decode(commands.send_error(1, 2, pb.PersistenceError, "disk"))
    assert cmd.send_error.error == pb.PersistenceError and cmd.send_error.message == "disk"


def test_message_fast_path() -> None:
    hp = build_headers_and_payload(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2), b"x")
    cmd, rest = decode(commands.message(3, 10, 20, -1, 0, None, hp))
    assert rest == hp
    m = cmd.message
    assert (m.consumer_id, m.message_id.ledgerId, m.message_id.entryId) == (3, 10, 20)
    assert m.message_id.partition == -1 and not m.message_id.HasField("partition")
    assert not m.HasField("redelivery_count") and not m.ack_set
    assert parse_headers_and_payload(rest).payload == b"x"


def test_message_extras_do_not_leak_between_calls() -> None:
    cmd, _ = decode(
        commands.message(1, 2, 3, 4, 2, [-1, 5], b"", batch_index=1, consumer_epoch=7)
    )
    m = cmd.message
    assert (m.message_id.partition, m.message_id.batch_index) == (4, 1)
    assert (m.redelivery_count, list(m.ack_set), m.consumer_epoch) == (2, [-1, 5], 7)
    decode(commands.message(1, 2, 3, 5, 0, None, b""))
    cmd, _ = decode(commands.message(9, 8, 7, -1, 0, [], b""))
    m = cmd.message
    assert not m.message_id.HasField("partition")
    assert not m.message_id.HasField("batch_index")
    assert not m.HasField("consumer_epoch") and not m.ack_set


def test_consumer_side_commands() -> None:
    cmd, _ = decode(commands.active_consumer_change(4, True))
    assert cmd.active_consumer_change.consumer_id == 4 and cmd.active_consumer_change.is_active
    cmd, _ = decode(commands.close_consumer(4, 11))
    assert (cmd.type, cmd.close_consumer.request_id) == (T.CLOSE_CONSUMER, 11)
    cmd, _ = decode(commands.close_consumer(4))
    assert cmd.close_consumer.request_id == commands.NO_REQUEST_ID
    cmd, _ = decode(commands.close_producer(5, 12))
    assert (cmd.type, cmd.close_producer.producer_id) == (T.CLOSE_PRODUCER, 5)
    cmd, _ = decode(commands.reached_end_of_topic(6))
    assert cmd.reachedEndOfTopic.consumer_id == 6


def test_ack_response() -> None:
    cmd, _ = decode(commands.ack_response(1, 2))
    assert cmd.ackResponse.request_id == 2 and not cmd.ackResponse.HasField("error")
    cmd, _ = decode(commands.ack_response(1, 3, pb.NotAllowedError, "no"))
    assert cmd.ackResponse.error == pb.NotAllowedError and cmd.ackResponse.message == "no"


def test_get_last_message_id_response() -> None:
    cmd, _ = decode(commands.get_last_message_id_response(1, 5, 6, partition=0, batch_index=-1))
    r = cmd.getLastMessageIdResponse
    assert (r.last_message_id.ledgerId, r.last_message_id.entryId, r.last_message_id.partition) == (5, 6, 0)
    assert not r.HasField("consumer_mark_delete_position")
    cmd, _ = decode(
        commands.get_last_message_id_response(1, 5, 6, mark_delete=(5, 2))
    )
    assert cmd.getLastMessageIdResponse.consumer_mark_delete_position.entryId == 2


def test_consumer_stats() -> None:
    cmd, _ = decode(commands.consumer_stats_response(1, consumer_name="c", available_permits=10))
    s = cmd.consumerStatsResponse
    assert (s.consumerName, s.availablePermits) == ("c", 10) and not s.HasField("error_code")
    cmd, _ = decode(commands.consumer_stats_error(1, pb.ConsumerNotFound, "gone"))
    assert cmd.consumerStatsResponse.error_code == pb.ConsumerNotFound


def test_lookup() -> None:
    cmd, _ = decode(commands.lookup_response(7, "pulsar://127.0.0.1:6650"))
    r = cmd.lookupTopicResponse
    assert (r.request_id, r.brokerServiceUrl, r.response) == (7, "pulsar://127.0.0.1:6650", r.Connect)
    assert r.authoritative and not r.proxy_through_service_url
    cmd, _ = decode(commands.lookup_error(8, pb.ServiceNotReady, "later"))
    r = cmd.lookupTopicResponse
    assert (r.response, r.error, r.message) == (r.Failed, pb.ServiceNotReady, "later")


def test_partitioned_metadata() -> None:
    cmd, _ = decode(commands.partitioned_metadata_response(1, 0))
    r = cmd.partitionMetadataResponse
    assert r.HasField("partitions") and r.partitions == 0 and r.response == r.Success
    cmd, _ = decode(commands.partitioned_metadata_error(2, pb.TopicNotFound, "x"))
    r = cmd.partitionMetadataResponse
    assert (r.response, r.error) == (r.Failed, pb.TopicNotFound)


def test_topics_of_namespace() -> None:
    cmd, _ = decode(commands.get_topics_of_namespace_response(1, ["a", "b"], topics_hash="h"))
    r = cmd.getTopicsOfNamespaceResponse
    assert (list(r.topics), r.topics_hash, r.changed, r.filtered) == (["a", "b"], "h", True, False)
    cmd, _ = decode(commands.get_topics_of_namespace_response(1, ["a"], True, changed=False))
    assert not cmd.getTopicsOfNamespaceResponse.topics and not cmd.getTopicsOfNamespaceResponse.changed


def test_schema_responses() -> None:
    schema = pb.Schema(name="s", schema_data=b"{}", type=pb.Schema.Json)
    cmd, _ = decode(commands.get_schema_response(1, schema, b"\x00" * 8))
    assert cmd.getSchemaResponse.schema == schema
    cmd, _ = decode(commands.get_schema_error(1, pb.TopicNotFound, "none"))
    assert cmd.getSchemaResponse.error_code == pb.TopicNotFound
    assert commands.schema_version(1) == b"\x00" * 7 + b"\x01"
    cmd, _ = decode(commands.get_or_create_schema_response(2, b"v1"))
    assert cmd.getOrCreateSchemaResponse.schema_version == b"v1"
    cmd, _ = decode(commands.get_or_create_schema_error(2, pb.IncompatibleSchema, "bad"))
    assert cmd.getOrCreateSchemaResponse.error_code == pb.IncompatibleSchema


# ---------------------------------------------------------------- client side


def test_client_connect_and_producer() -> None:
    cmd, _ = decode(client_commands.connect("raw-test", 21, auth_method_name="none"))
    assert (cmd.connect.client_version, cmd.connect.protocol_version) == ("raw-test", 21)
    cmd, _ = decode(
        client_commands.producer(
            "persistent://public/default/t", 1, 2, producer_name="p",
            access_mode=pb.Exclusive, initial_subscription_name="init", metadata={"k": "v"},
        )
    )
    p = cmd.producer
    assert (p.topic, p.producer_id, p.request_id, p.producer_name) == ("persistent://public/default/t", 1, 2, "p")
    assert p.producer_access_mode == pb.Exclusive and p.initial_subscription_name == "init"
    assert p.user_provided_producer_name and p.metadata[0].key == "k"


def test_client_send_subscribe_flow_ack() -> None:
    cmd, hp = decode(client_commands.send(1, 2, 3, b"\x00\x00\x00\x00"))
    assert (cmd.send.num_messages, hp) == (3, b"\x00\x00\x00\x00")
    S = pb.CommandSubscribe
    cmd, _ = decode(
        client_commands.subscribe(
            "t", "sub", 4, 5, S.Key_Shared, initial_position=S.Earliest,
            start_message_id=(1, 2), key_shared_mode=pb.STICKY,
        )
    )
    s = cmd.subscribe
    assert (s.subType, s.initialPosition, s.start_message_id.entryId) == (S.Key_Shared, S.Earliest, 2)
    assert s.keySharedMeta.keySharedMode == pb.STICKY
    assert decode(client_commands.flow(4, 500))[0].flow.messagePermits == 500
    cmd, _ = decode(client_commands.ack(4, [(1, 2), (1, 3)], pb.CommandAck.Cumulative, request_id=9))
    assert cmd.ack.ack_type == pb.CommandAck.Cumulative and len(cmd.ack.message_id) == 2
    assert cmd.ack.request_id == 9


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (client_commands.lookup("t", 1), T.LOOKUP),
        (client_commands.partitioned_metadata("t", 1), T.PARTITIONED_METADATA),
        (client_commands.unsubscribe(1, 2), T.UNSUBSCRIBE),
        (client_commands.redeliver_unacknowledged(1, [(1, 1)]), T.REDELIVER_UNACKNOWLEDGED_MESSAGES),
        (client_commands.get_last_message_id(1, 2), T.GET_LAST_MESSAGE_ID),
    ],
)
def test_other_client_commands(raw: bytes, expected: int) -> None:
    assert decode(raw)[0].type == expected


U64 = (1 << 64) - 1
_IDS = [0, 1, 127, 128, 300, 16_383, 16_384, 2**31, 2**32 + 5, 2**63, U64]


@pytest.mark.parametrize("highest", [None, 0, 1, 2**40, U64])
@pytest.mark.parametrize("value", _IDS)
def test_send_receipt_bytes_equal_protobuf_serialization(value: int, highest: int | None) -> None:
    """send_receipt writes its fields by hand; the bytes must be protobuf's own."""
    for pid, seq, ledger, entry in ((value, 7, 3, value), (1, value, value, 0), (value, value, value, value)):
        body = pb.CommandSendReceipt(
            producer_id=pid, sequence_id=seq, message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry),
            highest_sequence_id=highest,
        )
        expected = T(type=T.SEND_RECEIPT, send_receipt=body).SerializeToString()
        raw = commands.send_receipt(pid, seq, ledger, entry, highest)
        assert raw[8:] == expected
        assert raw[:4] == (len(expected) + 4).to_bytes(4, "big")
        assert raw[4:8] == len(expected).to_bytes(4, "big")


@pytest.mark.parametrize("ledger", [0, 3, 300, U64])
@pytest.mark.parametrize("pid", [0, 1, 200, U64])
def test_send_receipts_are_the_receipts_back_to_back(pid: int, ledger: int) -> None:
    """send_receipts encodes what the producer's receipts encode one by one, in order."""
    items = [(seq, entry, highest) for seq in (0, 5, 2**40, U64) for entry in (0, 127, 128, 2**33, U64)
             for highest in (None, 0, 2**20, U64)]
    expected = b"".join(commands.send_receipt(pid, seq, ledger, entry, highest) for seq, entry, highest in items)
    assert receipts.send_receipts(pid, ledger, items) == expected
    assert receipts.send_receipts(pid, ledger, []) == b""


@pytest.mark.parametrize("partition", [-1, 0, 5, 300])
@pytest.mark.parametrize("cid", [0, 1, 200, U64])
def test_message_encoder_frames_are_message_frames(cid: int, partition: int) -> None:
    """MessageEncoder encodes the consumer and ledger ids once; its frames are message()'s."""
    for ledger in (0, 3, 2**40, U64):
        enc = receipts.MessageEncoder(cid, ledger, partition)
        for entry in (0, 127, 128, 2**21 - 1, 2**21, 2**28, U64):
            for redeliveries, ack_set in ((0, None), (0, []), (3, None), (0, [1, -1]), (2, [5])):
                for data in (b"", b"x" * 100):
                    expected = commands.message(cid, ledger, entry, partition, redeliveries, ack_set, data)
                    assert enc.frame(entry, redeliveries, ack_set, data) == expected


def _protobuf_message(consumer_id: int, ledger: int, entry: int, partition: int, redeliveries: int,
                      ack_set: list[int] | None, batch_index: int | None, epoch: int | None) -> bytes:
    mid = pb.MessageIdData(ledgerId=ledger, entryId=entry, batch_index=batch_index)
    if partition >= 0:
        mid.partition = partition
    body = pb.CommandMessage(consumer_id=consumer_id, message_id=mid, ack_set=ack_set, consumer_epoch=epoch)
    if redeliveries:
        body.redelivery_count = redeliveries
    return T(type=T.MESSAGE, message=body).SerializeToString()


@pytest.mark.parametrize("value", _IDS)
@pytest.mark.parametrize(
    ("partition", "redeliveries", "ack_set", "batch_index", "epoch"),
    [(-1, 0, None, None, None), (0, 0, None, None, None), (5, 3, None, None, None), (-1, 2**32 - 1, [], None, None),
     (-1, 1, [-1, 0, 5, -(2**63), 2**63 - 1], None, None), (3, 0, [7], 0, 0), (-1, 0, None, -1, None),
     (-1, 0, None, 2**31 - 1, U64), (2**31 - 1, 4, [1, 2, 3], 9, 2**40)],
)
def test_message_bytes_equal_protobuf_serialization(
    value: int, partition: int, redeliveries: int, ack_set: list[int] | None, batch_index: int | None,
    epoch: int | None,
) -> None:
    """message() writes its fields by hand; the bytes must be protobuf's own, payload appended as is."""
    hp = build_headers_and_payload(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2), b"x" * 100)
    for cid, ledger, entry in ((value, 3, value), (1, value, 0), (value, value, value)):
        expected = _protobuf_message(cid, ledger, entry, partition, redeliveries, ack_set, batch_index, epoch)
        raw = commands.message(cid, ledger, entry, partition, redeliveries, ack_set, hp,
                               batch_index=batch_index, consumer_epoch=epoch)
        assert raw[8:8 + len(expected)] == expected
        assert raw[8 + len(expected):] == hp
        assert raw[:4] == (len(expected) + 4 + len(hp)).to_bytes(4, "big")
        assert raw[4:8] == len(expected).to_bytes(4, "big")
