"""A terminated dead letter (or retry) topic takes nothing: a broker-side dead-letter move, like
Pulsar's client-side DLQ producer (TopicTerminated), leaves the message in the source subscription
-- not lost, not appended past the DLQ's fixed end -- and says so once in the log and in
letterbox_move_storage_failures_total; the move route answers 412 naming the terminated target."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pulsar

from tests.admin.helpers import call, metric_total
from tests.conftest import BrokerProcess, wait_until

MAX_REDELIVERIES = 2


def _http(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return call(broker.admin_url, method, path, None if body is None else json.dumps(body), timeout=30)


def _path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("persistent://", "persistent/")


def _failures(broker: BrokerProcess, operation: str) -> float:
    return metric_total(broker.admin_url, "letterbox_move_storage_failures_total", operation=operation)


def _stored(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    try:
        while reader.has_message_available():
            out.append(reader.read_next(10_000).data())
    finally:
        reader.close()
    return out


def test_max_redeliveries_into_a_terminated_dlq_keeps_the_message(broker_factory: Any) -> None:
    broker = broker_factory()
    client = pulsar.Client(broker.url, operation_timeout_seconds=30)
    try:
        topic = f"persistent://public/default/term-dlq-{uuid.uuid4().hex[:8]}"
        dlq = f"{topic}-work-DLQ"
        client.create_producer(dlq).send(b"earlier dead letter")
        status, _ = _http(broker, "POST", _path(dlq) + "/terminate")
        assert status == 200
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    properties={"letterbox.dlq.max_redeliveries": str(MAX_REDELIVERIES)},
                                    initial_position=pulsar.InitialPosition.Earliest,
                                    negative_ack_redelivery_delay_ms=20)
        producer = client.create_producer(topic, batching_enabled=False)
        sent = producer.send(b"poison")
        # past max redeliveries the broker tries the DLQ, is refused, and the message comes back
        deliveries = 0
        while deliveries < MAX_REDELIVERIES + 4:
            msg = consumer.receive(30_000)
            assert msg.data() == b"poison"
            deliveries += 1
            consumer.negative_acknowledge(msg)
        assert wait_until(lambda: _failures(broker, "dead_letter") >= 1, timeout=30, interval=0.2)
        assert _stored(client, dlq) == [b"earlier dead letter"]  # nothing past the DLQ's end
        refusals = [line for line in broker.log().splitlines() if "is terminated" in line and dlq in line]
        assert len(refusals) == 1, refusals  # said once, not once per redelivery
        # the move route: a clear 412 naming the terminated target; the message stays put
        msg = consumer.receive(30_000)
        mid = f"{sent.ledger_id()}:{sent.entry_id()}"
        for target in (dlq, f"{topic}-work-RETRY"):
            if target.endswith("RETRY"):
                client.create_producer(target).close()
                assert _http(broker, "POST", _path(target) + "/terminate")[0] == 200
            status, body = _http(broker, "POST", _path(topic) + "/subscription/work/letterbox/move",
                                 {"messageId": mid, "target": target})
            assert status == 412, body
            assert target in body["reason"] and "terminated" in body["reason"], body
        assert _stored(client, dlq) == [b"earlier dead letter"]
        consumer.acknowledge(msg)  # still ours to acknowledge: it was never lost
        subs = _http(broker, "GET", _path(topic) + "/stats")[1]["subscriptions"]
        assert wait_until(lambda: _http(broker, "GET", _path(topic) + "/stats")[1]["subscriptions"]["work"]
                          ["msgBacklog"] == 0, timeout=30, interval=0.2), subs
    finally:
        client.close()
        broker.stop()


def test_parking_behind_a_poisoned_key_into_a_terminated_dlq_is_counted(broker_factory: Any) -> None:
    """A key poisoned before its DLQ was terminated: the messages parked behind it cannot be
    moved either; they stay in the subscription and the refusals are counted."""
    broker = broker_factory()
    client = pulsar.Client(broker.url, operation_timeout_seconds=30)
    try:
        topic = f"persistent://public/default/term-park-{uuid.uuid4().hex[:8]}"
        dlq = f"{topic}-s-DLQ"
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover,
                                    properties={"letterbox.dlq.max_redeliveries": str(MAX_REDELIVERIES),
                                                "letterbox.dlq.on_key_failure": "park"},
                                    initial_position=pulsar.InitialPosition.Earliest,
                                    negative_ack_redelivery_delay_ms=20)
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"A1", partition_key="A")
        while True:  # A1 fails until the broker dead-letters it and poisons key A
            try:
                consumer.negative_acknowledge(consumer.receive(5_000))
            except pulsar.Timeout:
                break
        assert _stored(client, dlq) == [b"A1"]
        assert _http(broker, "POST", _path(dlq) + "/terminate")[0] == 200
        before = _failures(broker, "dead_letter")
        producer.send(b"A2", partition_key="A")  # parked behind A1: a move into the terminated DLQ
        assert wait_until(lambda: _failures(broker, "dead_letter") > before, timeout=60, interval=0.2)
        assert _stored(client, dlq) == [b"A1"]
        backlog = _http(broker, "GET", _path(topic) + "/stats")[1]["subscriptions"]["s"]["msgBacklog"]
        assert backlog == 1  # A2 is still the subscription's
    finally:
        client.close()
        broker.stop()
