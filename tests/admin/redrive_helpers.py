"""Shared by the subscription-only redrive tests (admin, CLI, Spark): a topic with
subscriptions S1 and S2, dead letters made in S1 through the official client, backlogs."""
from __future__ import annotations

from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.conftest import wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
DLQ_POLICY = {"letterbox.dlq.max_redeliveries": "1"}


def backlog(base: str, topic: str, sub: str) -> int:
    status, stats = call(base, "GET", f"{P}/{topic}/stats")
    assert status == 200, stats
    return int(stats["subscriptions"][sub]["msgBacklog"])


def live_dead_letters(base: str, dlq: str, may_be_missing: bool = False) -> list[dict[str, Any]]:
    status, letters = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters?limit=10000")
    if status == 404 and may_be_missing:
        return []
    assert status == 200, letters
    return list(letters)


def drain(client: Any, topic: str, sub: str, timeout_ms: int = 1500) -> list[pulsar.Message]:
    consumer = client.subscribe(T + topic, sub, consumer_type=pulsar.ConsumerType.Shared)
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            break
        got.append(msg)
        consumer.acknowledge(msg)
    consumer.close()
    return got


def two_subscriptions(base: str, topic: str) -> None:
    assert call(base, "PUT", f"{P}/{topic}")[0] == 204
    for sub in ("S1", "S2"):
        assert call(base, "PUT", f"{P}/{topic}/subscription/{sub}", '"earliest"')[0] == 204


def dead_letter_in_s1(base: str, client: Any, topic: str, payloads: list[str], fail: set[str]) -> None:
    """Publish `payloads`; S1's consumer acks all but `fail`, which it nacks until dead-lettered."""
    consumer = client.subscribe(T + topic, "S1", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=20, properties=DLQ_POLICY)
    producer = client.create_producer(T + topic, batching_enabled=False)
    for p in payloads:
        producer.send(p.encode(), partition_key=f"key-{p}", properties={"payload": p})
    producer.close()

    def settle() -> bool:
        for _ in range(50):
            try:
                msg = consumer.receive(timeout_millis=50)
            except pulsar.Timeout:
                break
            if msg.data().decode() in fail:
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
        return len(live_dead_letters(base, f"{topic}-S1-DLQ", True)) >= len(fail)

    assert wait_until(settle, 30, 0)
    consumer.close()
