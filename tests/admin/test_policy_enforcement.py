"""Policies of issue 15 item 6 that bound dispatch, enforced through the official client:
the namespace dispatchRate (per topic) and maxUnackedMessagesPerSubscription, and the
topic-level maxConsumers, maxUnackedMessagesOnConsumer / OnSubscription, delayedDelivery,
dispatchRate and inactiveTopicPolicies, each winning over the namespace's."""
from __future__ import annotations

import datetime
import time
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import (
    call,
    consumer_blocked_at,
    make_namespace,
    set_policy,
    subscription_blocked_at,
)
from tests.conftest import BrokerProcess, wait_until


def _timed_receive(consumers: list[pulsar.Consumer], count: int) -> tuple[list[bytes], float]:
    """Receive and acknowledge `count` messages from `consumers` (60 s at most): (bodies, seconds)."""
    start = time.monotonic()
    got: list[bytes] = []
    while len(got) < count:
        assert time.monotonic() - start < 60, f"only {len(got)} of {count} messages in 60 s"
        for c in consumers:
            try:
                msg = c.receive(200)
            except pulsar.Timeout:
                continue
            got.append(msg.data())
            c.acknowledge(msg)
    return got, time.monotonic() - start


def test_namespace_dispatch_rate_bounds_the_topic_across_subscriptions(broker: BrokerProcess,
                                                                        client: Any) -> None:
    base = make_namespace(broker.admin_url, "enforce/rate")
    set_policy(broker.admin_url, base + "/dispatchRate", {"dispatchThrottlingRateInMsg": 5, "ratePeriodInSecond": 1})
    topic = "persistent://enforce/rate/t"
    a, b = client.subscribe(topic, "a"), client.subscribe(topic, "b")
    producer = client.create_producer(topic, batching_enabled=False)
    start = time.monotonic()  # a window opens at its first admitted entry, after this
    for i in range(10):
        producer.send(str(i).encode())
    got, _ = _timed_receive([a, b], 20)
    elapsed = time.monotonic() - start
    assert sorted(got) == sorted([str(i).encode() for i in range(10)] * 2)
    # 20 deliveries at 5 per second for the whole topic: 4 windows, the last opening >= 3 s
    # after the first (timed from before the first send, so a slow send cannot hide a window)
    assert elapsed >= 2.95, elapsed


def test_namespace_max_unacked_per_subscription_blocks_all_its_consumers(broker: BrokerProcess,
                                                                          client: Any) -> None:
    base = make_namespace(broker.admin_url, "enforce/unacked")
    set_policy(broker.admin_url, base + "/maxUnackedMessagesPerSubscription", 6)
    topic = "persistent://enforce/unacked/t"
    shared = pulsar.ConsumerType.Shared
    c1 = client.subscribe(topic, "s", consumer_type=shared, receiver_queue_size=100)
    c2 = client.subscribe(topic, "s", consumer_type=shared, receiver_queue_size=100)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(30):
        producer.send(str(i).encode())

    assert wait_until(lambda: subscription_blocked_at(broker.admin_url, topic, "s", 6), 20)
    got, _elapsed = _timed_receive([c1, c2], 30)  # acknowledging unblocks it
    assert sorted(got, key=int) == [str(i).encode() for i in range(30)]


def test_topic_level_limits_win_over_the_namespace(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "enforce/topic")
    t = "/admin/v2/persistent/enforce/topic"
    set_policy(broker.admin_url, base + "/maxConsumersPerTopic", 5)
    assert call(broker.admin_url, "PUT", t + "/capped")[0] == 204
    set_policy(broker.admin_url, t + "/capped/maxConsumers", 1)
    set_policy(broker.admin_url, t + "/capped/maxUnackedMessagesOnConsumer", 4)
    topic = "persistent://enforce/topic/capped"
    consumer = client.subscribe(topic, "a", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "b")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(12):
        producer.send(str(i).encode())

    assert wait_until(lambda: consumer_blocked_at(broker.admin_url, topic, "a", 4), 20)
    got, _elapsed = _timed_receive([consumer], 12)
    assert sorted(got, key=int) == [str(i).encode() for i in range(12)]
    assert call(broker.admin_url, "DELETE", t + "/capped/maxConsumers")[0] == 204
    client.subscribe(topic, "b").close()  # the namespace's 5 again

    assert call(broker.admin_url, "PUT", t + "/sub-capped")[0] == 204
    set_policy(broker.admin_url, t + "/sub-capped/maxUnackedMessagesOnSubscription", 3)
    topic = "persistent://enforce/topic/sub-capped"
    c1 = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    sub_producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        sub_producer.send(str(i).encode())

    assert wait_until(lambda: subscription_blocked_at(broker.admin_url, topic, "s", 3), 20)
    got, _elapsed = _timed_receive([c1], 10)
    assert len(got) == 10


def test_topic_level_delayed_delivery_and_dispatch_rate(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "enforce/flags")
    t = "/admin/v2/persistent/enforce/flags"
    set_policy(broker.admin_url, base + "/delayedDelivery", {"active": True, "tickTime": 1000})
    assert call(broker.admin_url, "PUT", t + "/now")[0] == 204
    set_policy(broker.admin_url, t + "/now/delayedDelivery", {"active": False, "tickTime": 1000})
    consumer = client.subscribe("persistent://enforce/flags/now", "s", consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer("persistent://enforce/flags/now").send(
        b"at once", deliver_after=datetime.timedelta(minutes=10))
    assert consumer.receive(10_000).data() == b"at once"  # the topic's "off" wins

    assert call(broker.admin_url, "PUT", t + "/slow")[0] == 204
    set_policy(broker.admin_url, t + "/slow/dispatchRate", {"dispatchThrottlingRateInMsg": 4, "ratePeriodInSecond": 1})
    slow = client.subscribe("persistent://enforce/flags/slow", "s")
    producer = client.create_producer("persistent://enforce/flags/slow", batching_enabled=False)
    start = time.monotonic()  # a window opens at its first admitted entry, after this
    for i in range(12):
        producer.send(str(i).encode())
    got, _ = _timed_receive([slow], 12)
    elapsed = time.monotonic() - start
    assert got == [str(i).encode() for i in range(12)]
    assert elapsed >= 1.95, elapsed  # 12 at 4 per second: 3 windows, the last >= 2 s after the first


def test_topic_level_inactive_topic_policy_deletes_only_that_topic(broker: BrokerProcess, client: Any) -> None:
    make_namespace(broker.admin_url, "enforce/idle")
    t = "/admin/v2/persistent/enforce/idle"
    for name in ("gone", "kept"):
        assert call(broker.admin_url, "PUT", f"{t}/{name}")[0] == 204
    set_policy(broker.admin_url, t + "/gone/inactiveTopicPolicies",
         {"inactiveTopicDeleteMode": "delete_when_no_subscriptions", "maxInactiveDurationSeconds": 1,
          "deleteWhileInactive": True})
    for name in ("gone", "kept"):
        client.create_producer(f"persistent://enforce/idle/{name}").close()
    assert wait_until(lambda: "persistent://enforce/idle/gone" not in call(broker.admin_url, "GET", t)[1], 30)
    assert "persistent://enforce/idle/kept" in call(broker.admin_url, "GET", t)[1]
