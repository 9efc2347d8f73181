"""Dead letters for the console tests, made the way users make them: the official pulsar-client
nacks messages until the broker dead-letters them (reason max-redeliveries), and letterbox.client's
RetryConsumer terminates some (reason terminated)."""
from __future__ import annotations

import json
import urllib.request
from typing import Any

import pulsar

from letterbox.client import DeadLetterPolicy, RetryConsumer


def make_dead_letters(client: pulsar.Client, admin_url: str, topic: str, sub: str, nacked: int,
                      terminated: int, token: str | None = None) -> str:
    """Publish `nacked` + `terminated` JSON messages with keys order-N, dead-letter them, return the
    DLQ topic name. Waits until the broker lists them all."""
    consumer = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                properties={"letterbox.dlq.max_redeliveries": "1"},
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(nacked):
        producer.send(json.dumps({"order": i, "item": "widget", "note": f"nacked {i}"}).encode(),
                      partition_key=f"order-{i}", properties={"shop": "north"})
    seen = 0
    while True:
        try:
            msg = consumer.receive(2000)
        except pulsar.Timeout:
            break
        seen += 1
        consumer.negative_acknowledge(msg)
    consumer.close()
    assert seen >= nacked, f"received only {seen} of {nacked}"
    dlq = f"{topic}-{sub}-DLQ"
    if terminated:
        retry = RetryConsumer(client, topic, sub, admin_url=admin_url,
                              dead_letter_policy=DeadLetterPolicy(max_redeliver_count=5),
                              auth_token=token)
        try:
            for i in range(terminated):
                producer.send(f"bad record {i}: \x00\x01 not json".encode(), partition_key=f"bad-{i}",
                              properties={"shop": "south"})
            for _ in range(terminated):
                retry.terminate(retry.receive(10_000), description="schema check failed")
        finally:
            retry.close()
    producer.close()
    return dlq


def admin_get(admin_url: str, path: str, token: str | None = None) -> Any:
    req = urllib.request.Request(admin_url + path)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def rest_path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def backlog(admin_url: str, topic: str, sub: str, token: str | None = None) -> int:
    stats = admin_get(admin_url, rest_path(topic) + "/stats", token)
    return int(stats["subscriptions"][sub]["msgBacklog"])


def live_dead_letters(admin_url: str, dlq: str, token: str | None = None) -> list[dict[str, Any]]:
    return list(admin_get(admin_url, rest_path(dlq) + "/letterbox/deadLetters?limit=10000", token))
