"""Namespace policies that bound topics, through REST and the official client: backlog
quota (producer_exception, producer_request_hold, consumer_backlog_eviction), max
producers / consumers per topic, max unacked messages per consumer, delayed delivery
off, auto topic creation off; and their bad-input answers."""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.admin.helpers import call, consumer_blocked_at, make_namespace, set_policy, topic_stats
from tests.broker.test_robustness import RawConn, _message
from tests.conftest import BrokerProcess, wait_until


def test_backlog_quota_producer_exception(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "quota/ex")
    set_policy(broker.admin_url, base + "/backlogQuota", {"limitSize": 500, "policy": "producer_exception"})
    assert call(broker.admin_url, "GET", base + "/backlogQuotaMap") == (
        200, {"destination_storage": {"limitSize": 500, "limitTime": -1, "policy": "producer_exception"}})
    topic = "persistent://quota/ex/t"
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=10_000)
    sent = 0
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        for _ in range(100):
            producer.send(b"x" * 100)
            sent += 1
    assert 3 <= sent < 100
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topic)
    for _ in range(sent):  # the consumer catches up: producers are welcome again
        consumer.acknowledge(consumer.receive(10_000))
    assert wait_until(lambda: topic_stats(broker.admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] == 0)
    client.create_producer(topic).send(b"after")


def test_backlog_quota_close_comes_after_the_receipts_of_sends_in_flight(broker: BrokerProcess) -> None:
    """SENDs written without waiting keep commits in flight when the quota closes the
    producer: each one stored is receipted before CLOSE_PRODUCER (a receipt after it finds no
    producer at the client, which then fails a send that was kept); those that cross the
    close are dropped unstored, unanswered, as Pulsar does (the client sends them again)."""
    base = make_namespace(broker.admin_url, "quota/inflight")
    set_policy(broker.admin_url, base + "/backlogQuota", {"limitSize": 500, "policy": "producer_exception"})
    topic = "persistent://quota/inflight/t"
    raw = RawConn(broker.port)
    try:
        raw.handshake()
        raw.send(client_commands.subscribe(topic, "slow", 1, 1))
        raw.expect(pb.BaseCommand.SUCCESS)
        raw.create_producer(topic, producer_id=7, request_id=2)
        sent, before_close = 0, []
        while True:
            while sent < 100 and sent - len(before_close) < 4:  # 4 in flight, the next sent at once
                raw.send(client_commands.send(7, sent, 1, _message("inflight", sent, b"x" * 100)))
                sent += 1
            frame = raw.read_frame()
            if frame.type == pb.BaseCommand.CLOSE_PRODUCER:
                break
            before_close.append(frame)
        after_close = raw.ping_pong()  # every SEND was handled before the PING
    finally:
        raw.close()
    assert [f.type for f in before_close] == [pb.BaseCommand.SEND_RECEIPT] * len(before_close)
    receipted = [f.command.send_receipt.sequence_id for f in before_close]
    assert receipted == list(range(len(receipted))) and 3 <= len(receipted) < sent
    assert after_close == []  # no receipt after the close, and no error for what crossed it
    stats = topic_stats(broker.admin_url, topic)
    assert stats["msgInCounter"] == len(receipted) == stats["subscriptions"]["slow"]["msgBacklog"]


def test_backlog_quota_producer_request_hold(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "quota/hold")
    set_policy(broker.admin_url, base + "/backlogQuota", {"limitSize": 500, "policy": "producer_request_hold"})
    topic = "persistent://quota/hold/t"
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
    results: list[Any] = []
    lock = threading.Lock()

    def done(res: Any, _mid: Any) -> None:
        with lock:
            results.append(res)

    stored = 0
    while topic_stats(broker.admin_url, topic)["publishers"]:  # each send is stored until the quota closes it
        producer.send(b"y" * 100)
        stored += 1
        assert stored < 50
    for _ in range(5):
        producer.send_async(b"held" * 25, done)
    # held, not failed: the reconnect is refused with ProducerBlockedQuotaExceededError and retried
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert not results and topic_stats(broker.admin_url, topic)["msgInCounter"] == stored
        time.sleep(0.1)
    got = 0
    while got < stored + 5:
        consumer.acknowledge(consumer.receive(30_000))
        got += 1
    assert wait_until(lambda: len(results) == 5, 30)
    assert all(r == pulsar.Result.Ok for r in results)  # none lost, none failed


def test_backlog_quota_consumer_backlog_eviction(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "quota/evict")
    set_policy(broker.admin_url, base + "/backlogQuota", {"limitSize": 500, "policy": "consumer_backlog_eviction"})
    topic = "persistent://quota/evict/t"
    client.subscribe(topic, "slow").close()
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(30):
        producer.send(b"z" * 100)  # never refused
    assert wait_until(lambda: topic_stats(broker.admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] < 10)


def test_max_producers_and_consumers_per_topic(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "limits/pc")
    set_policy(broker.admin_url, base + "/maxProducersPerTopic", 1)
    set_policy(broker.admin_url, base + "/maxConsumersPerTopic", 1)
    assert call(broker.admin_url, "GET", base + "/maxProducersPerTopic") == (200, 1)
    topic = "persistent://limits/pc/t"
    client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    client.subscribe(topic, "a")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "b")
    assert call(broker.admin_url, "DELETE", base + "/maxProducersPerTopic")[0] == 204
    client.create_producer(topic)


def test_max_unacked_per_consumer_namespace_policy(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "limits/unacked")
    set_policy(broker.admin_url, base + "/maxUnackedMessagesPerConsumer", 5)
    topic = "persistent://limits/unacked/t"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(str(i).encode())

    assert wait_until(lambda: consumer_blocked_at(broker.admin_url, topic, "s", 5))
    for _ in range(20):
        consumer.acknowledge(consumer.receive(10_000))


def test_delayed_delivery_off_and_auto_topic_creation_off(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "limits/flags")
    set_policy(broker.admin_url, base + "/delayedDelivery", {"active": False, "tickTime": 1000})
    set_policy(broker.admin_url, base + "/autoTopicCreation", {"allowAutoTopicCreation": False})
    assert call(broker.admin_url, "GET", base + "/autoTopicCreation") == (
        200, {"allowAutoTopicCreation": False, "topicType": "non-partitioned"})
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://limits/flags/nope")
    assert call(broker.admin_url, "PUT", "/admin/v2/persistent/limits/flags/made")[0] == 204
    topic = "persistent://limits/flags/made"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer(topic).send(b"now", deliver_after=__import__("datetime").timedelta(minutes=10))
    assert consumer.receive(10_000).data() == b"now"


@pytest.mark.parametrize(("method", "path", "body", "status", "words"), [
    ("POST", "/backlogQuota", {"limitSize": 1, "policy": "drop_everything"}, 400, "policy must be one of"),
    ("POST", "/backlogQuota", {"limitSize": -5, "policy": "producer_exception"}, 412, "limitSize"),
    ("POST", "/backlogQuota", {"policy": "producer_exception"}, 412, "needs limitSize"),
    ("POST", "/backlogQuota?backlogQuotaType=weight", {"limitSize": 1, "policy": "producer_exception"}, 400,
     "backlogQuotaType"),
    ("POST", "/backlogQuota", {"limitSize": 1, "policy": "producer_exception", "x": 1}, 400, "Unknown field"),
    ("POST", "/maxProducersPerTopic", -1, 412, "between 0"),
    ("POST", "/maxConsumersPerTopic", "many", 400, "integer"),
    ("POST", "/delayedDelivery", {"active": "yes"}, 400, "active"),
    ("POST", "/autoTopicCreation", {"allowAutoTopicCreation": True, "topicType": "partitioned"}, 412,
     "defaultNumPartitions"),
])
def test_bad_input(broker: BrokerProcess, method: str, path: str, body: Any, status: int, words: str) -> None:
    base = make_namespace(broker.admin_url, "limits/bad")
    got, err = call(broker.admin_url, method, base + path, json.dumps(body))
    assert got == status and words in err["reason"], err
    assert call(broker.admin_url, "GET", base + "/backlogQuotaMap") == (200, {})  # nothing stored


def test_unknown_namespace_404(broker: BrokerProcess) -> None:
    status, err = call(broker.admin_url, "POST", "/admin/v2/namespaces/public/nowhere/maxProducersPerTopic", "3")
    assert status == 404 and "does not exist" in err["reason"]


def test_subscription_dispatch_rate(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "limits/rate")
    set_policy(broker.admin_url, base + "/subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": 5, "ratePeriodInSecond": 1})
    assert call(broker.admin_url, "GET", base + "/subscriptionDispatchRate")[1]["dispatchThrottlingRateInMsg"] == 5
    topic = "persistent://limits/rate/t"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    start = time.monotonic()  # a window opens at its first admitted entry, after this
    for i in range(20):
        producer.send(str(i).encode())
    got = [consumer.receive(30_000).data() for _ in range(20)]
    elapsed = time.monotonic() - start
    assert got == [str(i).encode() for i in range(20)]
    assert elapsed >= 2.95, elapsed  # 20 messages at 5 per second: 4 windows, the last >= 3 s after the first
    status, err = call(broker.admin_url, "POST", base + "/dispatchRate",
                       json.dumps({"dispatchThrottlingRateInMsg": 5, "relativeToPublishRate": True}))
    assert status == 412 and "relativeToPublishRate" in err["reason"]


def test_inactive_topic_policies_delete_idle_topics(broker: BrokerProcess, client: Any) -> None:
    base = make_namespace(broker.admin_url, "limits/idle")
    set_policy(broker.admin_url, base + "/inactiveTopicPolicies", {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                                                   "maxInactiveDurationSeconds": 1, "deleteWhileInactive": True})
    listing = "/admin/v2/persistent/limits/idle"
    producer = client.create_producer("persistent://limits/idle/gone", batching_enabled=False)
    producer.send(b"x")
    consumer = client.subscribe("persistent://limits/idle/kept", "s")
    client.create_producer("persistent://limits/idle/kept").send(b"unread")
    consumer.close()  # no clients, but a backlog: not caught up, kept
    producer.close()
    assert wait_until(lambda: "persistent://limits/idle/gone" not in call(broker.admin_url, "GET", listing)[1], 20)
    assert "persistent://limits/idle/kept" in call(broker.admin_url, "GET", listing)[1]
    status, err = call(broker.admin_url, "POST", base + "/inactiveTopicPolicies",
                       json.dumps({"inactiveTopicDeleteMode": "whenever", "maxInactiveDurationSeconds": 1}))
    assert status == 400 and "inactiveTopicDeleteMode" in err["reason"]


def test_backlog_quota_producer_exception_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    import asyncio

    import pulsar.asyncio as pulsar_asyncio

    from tests.conftest import _quiet_logger

    base = make_namespace(broker.admin_url, "quota/async")
    set_policy(broker.admin_url, base + "/backlogQuota", {"limitSize": 500, "policy": "producer_exception"})

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            consumer = await client.subscribe("persistent://quota/async/t", "slow")
            producer = await client.create_producer("persistent://quota/async/t", batching_enabled=False)
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                for _ in range(100):
                    await producer.send(b"a" * 100)
            assert refused.value.error() == pulsar.Result.ProducerBlockedQuotaExceededException
            await consumer.close()
        finally:
            await client.close()

    asyncio.run(run())
