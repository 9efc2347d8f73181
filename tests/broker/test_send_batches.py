"""SENDs read in one pass are stored as one writer submission per producer
(broker/connection/send_batch.py): their receipts still come in send order, after the entries are
durable, with contiguous entry ids; a refusal or a duplicate between them is answered in
its place; a frame of another kind submits the SENDs before it first."""
from __future__ import annotations

import pulsar

from letterbox.protocol import client_commands, pb
from tests.broker.test_robustness import RawConn, _message, _read_all, topic_name
from tests.conftest import BrokerProcess, _quiet_logger

T = pb.BaseCommand


def _send(seq: int, num_messages: int = 1) -> bytes:
    return client_commands.send(7, seq, num_messages, _message("batch-producer", seq, f"m{seq}".encode()))


def test_sends_in_one_write_are_receipted_in_order_with_refusals_in_place(broker: BrokerProcess) -> None:
    topic = topic_name("sendbatch")
    raw = RawConn(broker.port)
    try:
        raw.handshake()
        raw.create_producer(topic, producer_id=7, request_id=1)
        ping = _ping()
        # one write: 0 1 [2 refused: declares 2 messages, holds 1] 3 4, a PING, 5 6
        raw.send(b"".join((_send(0), _send(1), _send(2, num_messages=2), _send(3), _send(4), ping, _send(5), _send(6))))
        answers: list[tuple[str, int, int]] = []
        while len(answers) < 7:
            frame = raw.read_frame()
            if frame.type == T.SEND_RECEIPT:
                r = frame.command.send_receipt
                assert r.producer_id == 7
                answers.append(("receipt", r.sequence_id, r.message_id.entryId))
            elif frame.type == T.SEND_ERROR:
                e = frame.command.send_error
                assert "message refused" in e.message
                answers.append(("error", e.sequence_id, -1))
        assert [a[:2] for a in answers] == [
            ("receipt", 0), ("receipt", 1), ("error", 2), ("receipt", 3), ("receipt", 4), ("receipt", 5),
            ("receipt", 6),
        ]
        assert [a[2] for a in answers if a[0] == "receipt"] == [0, 1, 2, 3, 4, 5]
    finally:
        raw.close()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        assert _read_all(client, topic, expected=6) == [b"m0", b"m1", b"m3", b"m4", b"m5", b"m6"]
    finally:
        client.close()


def _ping() -> bytes:
    body = T(type=T.PING, ping=pb.CommandPing()).SerializeToString()
    return (len(body) + 4).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
