"""Guards of the failure core (issue 12, item 6): namespace policies never dead-letter a dead
letter topic, so a namespace TTL plus a namespace dead-letter policy with an initial subscription
gives exactly one dead letter topic per source subscription (no `...-DLQ-...-DLQ`)."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, wait_until

N = "/admin/v2/namespaces/public/"


@pytest.fixture
def ns(broker: BrokerProcess, request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("_", "-")[:32] + "-" + uuid.uuid4().hex[:6]
    assert call(broker.admin_url, "PUT", N + name)[0] == 204
    return name


def test_namespace_ttl_and_dead_letter_policy_make_one_dlq_per_subscription(
    broker: BrokerProcess, client: Any, ns: str
) -> None:
    b = broker.admin_url
    topic = f"public/{ns}/orders"
    subs = ("s1", "s2")
    assert call(b, "PUT", f"/admin/v2/persistent/{topic}")[0] == 204
    for s in subs:
        assert call(b, "PUT", f"/admin/v2/persistent/{topic}/subscription/{s}", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    assert call(b, "POST", N + ns + "/letterbox/deadLetterPolicy",
                '{"maxRedeliverCount": 3, "initialSubscriptionName": "audit"}')[0] == 204
    assert call(b, "POST", N + ns + "/messageTTL", "2")[0] == 204
    dlqs = {s: f"{topic}-{s}-DLQ" for s in subs}

    def audit_backlog(dlq: str) -> int:
        status, stats = call(b, "GET", f"/admin/v2/persistent/{dlq}/stats")
        if status != 200 or "audit" not in stats["subscriptions"]:
            return -1
        return int(stats["subscriptions"]["audit"]["msgBacklog"])

    producer = client.create_producer("persistent://" + topic, batching_enabled=False)

    def send_and_wait_dead_lettered(payloads: list[bytes], expected: int) -> None:
        for p in payloads:
            producer.send(p)
        assert wait_until(lambda: all(audit_backlog(d) == expected for d in dlqs.values()), 20), \
            {d: audit_backlog(d) for d in dlqs.values()}

    send_and_wait_dead_lettered([b"m0", b"m1", b"m2"], 3)
    # Two canaries, each sent once the one before is dead-lettered: the expiry pass that
    # moves the second one starts after a whole pass in which every dead letter was past
    # the TTL, so by then a dead-letter-of-a-dead-letter would have been made.
    send_and_wait_dead_lettered([b"canary-1"], 4)
    send_and_wait_dead_lettered([b"canary-2"], 5)
    producer.close()

    status, listed = call(b, "GET", f"/admin/v2/persistent/public/{ns}")
    assert status == 200
    names = sorted(t.removeprefix("persistent://") for t in listed)
    assert names == sorted([topic, *dlqs.values()])
    assert not [n for n in names if n.count("-DLQ") > 1]
    # the dead letters are kept: the namespace TTL leaves dead letter topics alone
    assert {d: audit_backlog(d) for d in dlqs.values()} == {d: 5 for d in dlqs.values()}
    status, dead = call(b, "GET", N + ns + "/letterbox/deadLetterTopics")
    assert status == 200
    assert sorted((t["topic"], t["byReason"]) for t in dead) == sorted(
        (f"persistent://{d}", {"expired": 5}) for d in dlqs.values())


@pytest.mark.parametrize("local", ["orders-s-DLQ", "orders-s-RETRY", "orders-s-RETRY-5s"])
def test_namespace_dead_letter_policy_never_dead_letters_a_failure_topic(
    broker: BrokerProcess, client: Any, ns: str, local: str
) -> None:
    """Nacks on a dead letter or retry topic under a namespace dead-letter policy are
    redelivered (and counted), never moved to a `<topic>-<sub>-DLQ`."""
    b = broker.admin_url
    assert call(b, "POST", N + ns + "/letterbox/deadLetterPolicy", '{"maxRedeliverCount": 1}')[0] == 204
    topic = f"persistent://public/{ns}/{local}"
    consumer = client.subscribe(topic, "audit", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"dead")
    producer.close()
    counts = []
    for _ in range(4):
        msg = consumer.receive(10_000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    consumer.acknowledge(consumer.receive(10_000))
    consumer.close()
    assert counts == [0, 1, 2, 3]
    listed = call(b, "GET", f"/admin/v2/persistent/public/{ns}")[1]
    assert listed == [topic]
