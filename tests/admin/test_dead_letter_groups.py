"""Failure groups of a dead letter topic over the admin API, through the official client: a DLQ
holding three distinct failure causes lists three groups with their counts, times and an example;
the group filter narrows the listing, the purge and the redrive (which moves exactly its group)."""
from __future__ import annotations

import json
from typing import Any

import pulsar

from letterbox.failure import fingerprint
from letterbox.message_properties import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_TIME,
    FAILURE_DESCRIPTION,
    FAILURE_ERROR_CLASS,
    REAL_TOPIC,
)
from tests.admin.helpers import call
from tests.conftest import BrokerProcess

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
T0 = 1_790_000_000_000  # dead-letter times: three hours from here


def _cause(i: int) -> dict[str, str]:
    """Three causes: 1,500 timeouts, 1,000 bad amounts, 500 expired (no class, no text)."""
    if i % 6 < 3:
        return {DEAD_LETTER_REASON: "max-redeliveries", FAILURE_ERROR_CLASS: "db.Timeout",
                FAILURE_DESCRIPTION: f"timeout after {100 + i}ms on shard {i % 7} (request {i:032x})"}  # 32 hex digits: a UUID without dashes
    if i % 6 < 5:
        return {DEAD_LETTER_REASON: "terminated", FAILURE_ERROR_CLASS: "ValueError",
                FAILURE_DESCRIPTION: f"field 'amount' is not a number: '{i}x'"}
    return {DEAD_LETTER_REASON: "expired"}


def _fill(client: Any, dlq: str, n: int) -> None:
    producer = client.create_producer(T + dlq, batching_enabled=True, batching_max_messages=500,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)
    failed: list[Any] = []
    for i in range(n):
        props = {**_cause(i), REAL_TOPIC: T + "orders", DEAD_LETTER_TIME: str(T0 + i * 3_600)}
        producer.send_async(json.dumps({"i": i}).encode(),
                            lambda res, _id: failed.append(res) if res != pulsar.Result.Ok else None,
                            properties=props)
    producer.flush()
    producer.close()
    assert not failed, failed[:3]


def test_three_causes_three_groups_and_a_group_redrive(broker: BrokerProcess, client: Any) -> None:
    base, dlq = broker.admin_url, "orders-sub-DLQ"
    _fill(client, dlq, 3_000)
    status, answer = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters/groups", timeout=60)
    assert status == 200, answer
    assert answer["messages"] == 3_000
    groups = answer["groups"]
    assert [(g["reason"], g["errorClass"], g["count"]) for g in groups] == [
        ("max-redeliveries", "db.Timeout", 1_500), ("terminated", "ValueError", 1_000), ("expired", None, 500)]
    timeouts, amounts, expired = groups
    assert timeouts["pattern"] == "timeout after <n>ms on shard <n> (request <uuid>)"
    assert amounts["pattern"] == "field <q> is not a number: <q>"
    assert amounts["fingerprint"] == fingerprint(_cause(3))
    assert timeouts["firstDeadLetteredAt"] == T0 and timeouts["lastDeadLetteredAt"] == T0 + 2_996 * 3_600
    assert expired["example"]["messageId"].count(":") == 3 and expired["example"]["text"] == ""
    # one time axis for all groups; each group's bars add up to its count
    axis = answer["histogram"]
    assert axis["bucketMs"] == 3_600_000 and axis["start"] <= T0 and 3 <= axis["buckets"] <= 4
    assert all(len(g["histogram"]) == axis["buckets"] and sum(g["histogram"]) == g["count"] for g in groups)

    # the listing and a purge dry run narrowed to one group
    status, listed = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters?limit=10000&group={expired['fingerprint']}")
    assert status == 200 and len(listed) == 500
    assert {m["properties"][DEAD_LETTER_REASON] for m in listed} == {"expired"}
    status, purged = call(base, "POST", f"{P}/{dlq}/letterbox/purge",
                          json.dumps({"group": expired["fingerprint"], "dryRun": True}))
    assert (status, purged["purged"]) == (200, 500)

    # redrive one group: exactly its 1,000 messages reach the source topic
    assert call(base, "PUT", f"{P}/orders/subscription/check", '"earliest"')[0] == 204
    status, moved = call(base, "POST", f"{P}/{dlq}/letterbox/redrive",
                         json.dumps({"group": amounts["fingerprint"]}), timeout=60)
    assert status == 200 and moved["moved"] == 1_000, moved
    consumer = client.subscribe(T + "orders", "check")
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=1_000)
        except pulsar.Timeout:
            break
        got.append(json.loads(msg.data())["i"])
        consumer.acknowledge(msg)
    consumer.close()
    assert sorted(got) == [i for i in range(3_000) if i % 6 in (3, 4)]
    status, after = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters/groups", timeout=60)
    assert [(g["fingerprint"], g["count"]) for g in after["groups"]] == [
        (timeouts["fingerprint"], 1_500), (expired["fingerprint"], 500)]


def test_a_group_that_is_not_a_fingerprint_is_refused(broker: BrokerProcess, client: Any) -> None:
    base, dlq = broker.admin_url, "bad-group-DLQ"
    _fill(client, dlq, 6)
    for method, path, body in (
        ("POST", "letterbox/redrive", json.dumps({"group": "timeouts"})),
        ("POST", "letterbox/purge", json.dumps({"group": 12})),
        ("GET", "letterbox/deadLetters?group=xyz", None),
    ):
        status, answer = call(base, method, f"{P}/{dlq}/{path}", body)
        assert status == 400 and "group" in answer["reason"] and "fingerprint" in answer["reason"], answer
    status, answer = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters/groups")
    assert status == 200 and answer["messages"] == 6 and len(answer["groups"]) == 3
    status, answer = call(base, "GET", f"{P}/no-such-DLQ/letterbox/deadLetters/groups")
    assert status == 404, answer
