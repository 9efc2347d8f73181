"""ACK frames over a raw socket: the common shape (decoded by the compiled codec when it is
built) and the uncommon ones (protobuf's parse) acknowledge the same entries and get the same
answers and errors; a malformed ACK still closes the connection. Run with and without
LETTERBOX_PURE_PYTHON=1 (the broker inherits it)."""
from __future__ import annotations

import time
import uuid

from letterbox.errors import ServerError
from letterbox.protocol import build_headers_and_payload, client_commands, encode_command, pb
from tests.admin.helpers import call
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess, wait_until

T = pb.BaseCommand
SUB = pb.CommandSubscribe


def ack(consumer_id: int, ids: list[tuple[int, int]], ack_type: int = 0, **extra: object) -> bytes:
    body = pb.CommandAck(consumer_id=consumer_id, ack_type=ack_type,  # type: ignore[arg-type]
                         message_id=[pb.MessageIdData(ledgerId=lid, entryId=eid) for lid, eid in ids],
                         **extra)  # type: ignore[arg-type]
    return encode_command(T(type=T.ACK, ack=body))


def fill(conn: RawConn, topic: str, count: int, sub_type: int) -> list[tuple[int, int]]:
    """`count` messages stored on `topic`, delivered to consumer 1 of subscription "s":
    their (ledger, entry) ids in order."""
    conn.create_producer(topic, 1, 1)
    for seq in range(count):
        meta = pb.MessageMetadata(producer_name="acks", sequence_id=seq, publish_time=int(time.time() * 1000))
        conn.send(client_commands.send(1, seq, 1, build_headers_and_payload(meta, b"m%d" % seq)))
        assert conn.expect(T.SEND_RECEIPT).command.send_receipt.sequence_id == seq
    conn.send(client_commands.subscribe(topic, "s", 1, 2, sub_type, initial_position=SUB.Earliest))
    conn.expect(T.SUCCESS)
    conn.send(client_commands.flow(1, 100))
    ids = []
    for _ in range(count):
        m = conn.expect(T.MESSAGE).command.message.message_id
        ids.append((m.ledgerId, m.entryId))
    return ids


def backlog(broker: BrokerProcess, topic: str) -> int:
    path = "/admin/v2/persistent/public/default/" + topic.rsplit("/", 1)[1] + "/stats"
    return int(call(broker.admin_url, "GET", path)[1]["subscriptions"]["s"]["msgBacklog"])


def acked(conn: RawConn, request_id: int) -> pb.CommandAckResponse:
    r = conn.expect(T.ACK_RESPONSE).command.ackResponse
    assert r.request_id == request_id
    return r


def test_common_and_uncommon_acks_acknowledge_the_same(broker: BrokerProcess, conn: RawConn) -> None:
    topic = f"persistent://public/default/acks-{uuid.uuid4().hex[:8]}"
    ids = fill(conn, topic, 6, SUB.Shared)
    ledger = ids[0][0]
    conn.send(ack(1, ids[:2], request_id=11))  # common shape
    assert not acked(conn, 11).HasField("error")
    conn.send(ack(1, ids[2:3], request_id=12, properties=[pb.KeyLongValue(key="k", value=1)]))  # uncommon
    assert not acked(conn, 12).HasField("error")
    conn.send(ack(1, [ids[3], (ledger + 1000, ids[4][1])], request_id=13))  # two ledgers: the other one's id is not ours
    assert not acked(conn, 13).HasField("error")
    assert wait_until(lambda: backlog(broker, topic) == 2), backlog(broker, topic)
    conn.send(ack(1, ids[4:]))  # no request id: no answer, acked all the same
    assert wait_until(lambda: backlog(broker, topic) == 0), backlog(broker, topic)
    conn.ping_pong()


def test_cumulative_ack_errors_stay_as_they_were(broker: BrokerProcess, conn: RawConn) -> None:
    topic = f"persistent://public/default/acks-{uuid.uuid4().hex[:8]}"
    ids = fill(conn, topic, 3, SUB.Exclusive)
    conn.send(ack(1, ids[:2], pb.CommandAck.Cumulative, request_id=21))
    r = acked(conn, 21)
    assert r.error == ServerError.NotAllowedError and "exactly one message id" in r.message, r
    conn.send(ack(1, [], pb.CommandAck.Cumulative, request_id=22))
    assert acked(conn, 22).error == ServerError.NotAllowedError
    conn.send(ack(99, ids[:1], request_id=23))
    r = acked(conn, 23)
    assert r.consumer_id == 99 and r.error == ServerError.ConsumerNotFound, r
    assert backlog(broker, topic) == 3
    conn.send(ack(1, ids[1:2], pb.CommandAck.Cumulative, request_id=24))
    assert not acked(conn, 24).HasField("error")
    assert wait_until(lambda: backlog(broker, topic) == 1), backlog(broker, topic)


def test_cumulative_ack_on_shared_is_refused(broker: BrokerProcess, conn: RawConn) -> None:
    topic = f"persistent://public/default/acks-{uuid.uuid4().hex[:8]}"
    ids = fill(conn, topic, 2, SUB.Shared)
    conn.send(ack(1, ids[1:], pb.CommandAck.Cumulative, request_id=31))
    r = acked(conn, 31)
    assert r.error == ServerError.NotAllowedError and "Cumulative" in r.message, r
    assert backlog(broker, topic) == 2


def test_malformed_ack_closes_the_connection(broker: BrokerProcess, conn: RawConn) -> None:
    topic = f"persistent://public/default/acks-{uuid.uuid4().hex[:8]}"
    ids = fill(conn, topic, 1, SUB.Shared)
    good = ack(1, ids)[8:]
    cut = good[:-1]  # the message id's last byte is missing: protobuf refuses it
    body = cut[:3] + bytes([len(cut) - 4]) + cut[4:]
    conn.send((len(body) + 4).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body)
    conn.frames_until_closed()  # fails if the broker keeps the connection open
    assert backlog(broker, topic) == 1
