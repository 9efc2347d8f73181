"""The failure events topic of a namespace, through the official client: opt-in by the namespace
policy; a nack with a reason -> dead letter -> redrive (with an edit) sequence publishes its events
in order, readable by any consumer; a namespace that did not opt in publishes nothing; bad policies
are refused naming the field."""
from __future__ import annotations

import contextlib
import json
from typing import Any

import pulsar

from letterbox.client import message_id_text
from letterbox.failure.events import FAILURE_EVENTS_TOPIC
from tests.admin.helpers import call
from tests.conftest import BrokerProcess, wait_until

NS = "public/fe"
T = f"persistent://{NS}/"
P = f"/admin/v2/persistent/{NS}"
POLICY = f"/admin/v2/namespaces/{NS}/letterbox/failureEvents"
EVENTS = T + FAILURE_EVENTS_TOPIC


def _events(consumer: Any, n: int) -> list[dict[str, Any]]:
    got = []
    while len(got) < n:
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        got.append(json.loads(msg.data()))
    return got


def _nack_to_dlq(base: str, client: Any, topic: str) -> None:
    consumer = client.subscribe(T + topic, "S", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=20,
                                properties={"letterbox.dlq.max_redeliveries": "1"})
    producer = client.create_producer(T + topic, batching_enabled=False)
    producer.send(b'{"amount": "x"}')
    producer.close()
    for attempt in (1, 2):
        msg = consumer.receive(timeout_millis=10_000)
        status, _ = call(base, "POST", f"{P}/{topic}/subscription/S/letterbox/attempts/{message_id_text(msg)}",
                         json.dumps({"ending": "nack", "reason": f"db down (attempt {attempt})"}))
        assert status == 200
        consumer.negative_acknowledge(msg)

    def dead() -> bool:  # the DLQ answers 404 (an error object) until the move created it
        status, letters = call(base, "GET", f"{P}/{topic}-S-DLQ/letterbox/deadLetters")
        return status == 200 and isinstance(letters, list) and len(letters) == 1

    assert wait_until(dead, 20, 0.05)
    consumer.close()


def test_nack_dead_letter_redrive_edit_events_in_order(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    assert call(base, "PUT", f"/admin/v2/namespaces/{NS}")[0] == 204
    status, policy = call(base, "GET", POLICY)
    assert status == 200 and policy["enabled"] is False and policy["topic"] == EVENTS
    _nack_to_dlq(base, client, "quiet")  # not opted in yet: no events
    assert call(base, "POST", POLICY, json.dumps({"enabled": True, "retentionTimeInMinutes": 60}))[0] == 204
    assert call(base, "GET", POLICY)[1]["retentionTimeInMinutes"] == 60
    watcher = client.subscribe(EVENTS, "watch", initial_position=pulsar.InitialPosition.Earliest)

    _nack_to_dlq(base, client, "orders")
    status, moved = call(base, "POST", f"{P}/orders-S-DLQ/letterbox/redrive", json.dumps(
        {"edit": {"jsonPatch": [{"op": "replace", "path": "/amount", "value": 1}]}}))
    assert status == 200 and moved["moved"] == 1, moved
    events = _events(watcher, 3)
    # the nack that dead-letters is the dead-letter event (its reason is the description)
    assert [(e["type"], e["topic"], e["subscription"], e["reason"]) for e in events] == [
        ("nack", T + "orders", "S", "db down (attempt 1)"),
        ("dead-letter", T + "orders", "S", "max-redeliveries"),
        ("edit", T + "orders", "S", "max-redeliveries"),
    ]
    assert len({e["messageId"] for e in events}) == 1  # one message, followed through
    dead, edit = events[1], events[2]
    assert dead["deadLetterTopic"] == T + "orders-S-DLQ" and dead["deliveryCount"] == 2
    assert dead["description"] == "db down (attempt 2)"
    assert edit["deadLetterMessageId"] == dead["deadLetterMessageId"] and edit["target"] == T + "orders"
    assert edit["changes"] == ["jsonPatch:1"] and len(edit["oldPayloadSha256"]) == 64
    try:  # nothing from the quiet namespace run, nothing more
        extra = watcher.receive(timeout_millis=500)
        raise AssertionError(f"unexpected event {extra.data()!r}")
    except pulsar.Timeout:
        pass
    watcher.close()

    assert call(base, "DELETE", POLICY)[0] == 204
    assert call(base, "GET", POLICY)[1]["enabled"] is False
    status, bad = call(base, "POST", POLICY, json.dumps({"enabled": "yes"}))
    assert status == 400 and "enabled" in bad["reason"], bad
    status, bad = call(base, "POST", POLICY, json.dumps({"retentionSizeInMB": 0}))
    assert status == 400 and "retentionSizeInMB" in bad["reason"], bad


def test_terminate_and_park_events(broker: BrokerProcess, client: Any) -> None:
    """A terminate through letterbox.client (the admin move) and a message parked behind its
    poisoned key (ordered quarantine) each publish their event, in order."""
    from letterbox.client import DeadLetterPolicy, RetryConsumer

    base, ns = broker.admin_url, "public/fe2"
    assert call(base, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    assert call(base, "POST", f"/admin/v2/namespaces/{ns}/letterbox/failureEvents", "{}")[0] == 204
    watcher = client.subscribe(f"persistent://{ns}/{FAILURE_EVENTS_TOPIC}", "watch")
    topic = f"persistent://{ns}/jobs"
    consumer = RetryConsumer(client, topic, "w", admin_url=base, dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3))
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"bad")
    producer.close()
    consumer.terminate(consumer.receive(10_000), "schema v1 is gone")
    consumer.close()

    parked = client.subscribe(topic + "-keyed", "k", consumer_type=pulsar.ConsumerType.Failover,
                              negative_ack_redelivery_delay_ms=20,
                              properties={"letterbox.dlq.max_redeliveries": "1", "letterbox.dlq.on_key_failure": "park"})
    producer = client.create_producer(topic + "-keyed", batching_enabled=False)
    for body in (b"poison", b"after"):
        producer.send(body, partition_key="k1")
    producer.close()

    def settle() -> bool:
        with contextlib.suppress(pulsar.Timeout):
            parked.negative_acknowledge(parked.receive(timeout_millis=100))
        letters = call(base, "GET", f"/admin/v2/persistent/{ns}/jobs-keyed-k-DLQ/letterbox/deadLetters")[1]
        return isinstance(letters, list) and len(letters) == 2

    assert wait_until(settle, 30, 0)
    parked.close()
    events = _events(watcher, 3)
    assert [(e["type"], e["reason"]) for e in events] == [
        ("terminate", "terminated"), ("dead-letter", "max-redeliveries"), ("park", "parked-behind")]
    assert events[0]["description"] == "schema v1 is gone" and events[0]["subscription"] == "w"
    assert events[2]["parkedBehind"] == events[1]["messageId"]
    watcher.close()
