"""Issue 14 items 1+2 acceptance: the delivery attempt log with failure reasons from
letterbox.client. A message nacked twice with reasons, timed out once, then terminated
shows 4 attempts in order, with consumer names and reasons, through REST, the CLI and
its dead letter's DELIVERY_ATTEMPTS; the log survives kill -9 of the broker; it is gone
once the message is acked; reasons come from AsyncRetryConsumer too."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from letterbox.client import AsyncRetryConsumer, DeadLetterPolicy, RetryConsumer, message_id_text
from tests.cli.helpers import admin, ok, ok_json
from tests.client.test_async_retry_consumer import run as run_async
from tests.client.test_retry_consumer import dlq_messages, new_topic
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

pytestmark = pytest.mark.letterbox_extension(
    "the delivery attempt log REST route and nack announcements are letterbox extensions (Apache Pulsar has neither)")

SUB = "work"


def attempts_path(topic: str, message_id: str, sub: str = SUB) -> str:
    name = topic.removeprefix("persistent://")
    return f"/admin/v2/persistent/{name}/subscription/{sub}/letterbox/attempts/{message_id}"


def http(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def read_log(broker: BrokerProcess, topic: str, message_id: str) -> dict[str, Any]:
    status, body = http(broker, "GET", attempts_path(topic, message_id))
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def summary(attempts: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(a["ending"], a["consumer"], a["reason"]) for a in attempts]


def retry_consumer(client: pulsar.Client, broker: BrokerProcess, topic: str, name: str) -> RetryConsumer:
    return RetryConsumer(client, topic, SUB, enable_retry=False, admin_url=broker.admin_url,
                         dead_letter_policy=DeadLetterPolicy(max_redeliver_count=5), consumer_name=name,
                         negative_ack_redelivery_delay_ms=20, unacked_messages_timeout_ms=10_000)


def test_nacked_twice_timed_out_terminated_four_attempts_across_kill_9(broker_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker: BrokerProcess = broker_factory(data)
    topic = new_topic("attempts")
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    consumer = retry_consumer(client, broker, topic, "worker-1")
    client.create_producer(topic, batching_enabled=False).send(b"poison")

    msg = consumer.receive(10_000)
    mid = message_id_text(msg)
    consumer.negative_acknowledge(msg, reason="bad json at line 1")
    msg = consumer.receive(10_000)
    consumer.negative_acknowledge(msg, reason="db down")
    msg = consumer.receive(10_000)
    assert msg.redelivery_count() == 2
    # not acknowledged: the client's ack timeout (10 s, its minimum) asks for it again
    msg = consumer.receive(30_000)
    assert msg.redelivery_count() == 3
    before = read_log(broker, topic, mid)
    assert before["source"] == "subscription" and before["redeliveryCount"] == 3
    assert summary(before["attempts"]) == [("nack", "worker-1", "bad json at line 1"),
                                           ("nack", "worker-1", "db down"),
                                           ("ack-timeout", "worker-1", None)]
    assert all(a["address"].startswith("127.0.0.1:") for a in before["attempts"])
    assert all(0 < a["deliveredAt"] <= a["endedAt"] for a in before["attempts"])

    broker.kill()  # kill -9 while the 4th delivery is out
    client.close()
    broker = broker_factory(data)
    after = read_log(broker, topic, mid)
    assert after["attempts"] == before["attempts"], "the log survives kill -9"

    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    consumer = retry_consumer(client, broker, topic, "worker-2")
    msg = consumer.receive(30_000)
    consumer.terminate(msg, "unrecoverable: schema v1")
    expected = [("nack", "worker-1", "bad json at line 1"), ("nack", "worker-1", "db down"),
                ("ack-timeout", "worker-1", None), ("terminated", "worker-2", "unrecoverable: schema v1")]

    dead = dlq_messages(client, f"{topic}-{SUB}-DLQ", expect=1)
    assert len(dead) == 1
    props = dead[0].properties()
    assert props["DEAD_LETTER_REASON"] == "terminated"  # the category
    assert props["FAILURE_DESCRIPTION"] == "unrecoverable: schema v1"  # the client's text
    in_dead_letter = json.loads(props["DELIVERY_ATTEMPTS"])
    assert summary(in_dead_letter) == expected
    assert in_dead_letter[:3] == before["attempts"]

    rest = read_log(broker, topic, mid)
    assert rest["acknowledged"] and rest["source"] == "dead-letter"
    assert rest["deadLetter"]["topic"] == f"{topic}-{SUB}-DLQ"
    assert rest["attempts"] == in_dead_letter

    assert ok_json(admin(broker, "--output", "json", "topics", "attempts", topic, SUB, mid)) == rest
    human = ok(admin(broker, "topics", "attempts", topic, SUB, mid))
    assert "acknowledged, 4 failed attempt(s)" in human and "dead-lettered as" in human
    lines = [line for line in human.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"], ["4"])]
    assert [line.split()[0] for line in lines] == ["1", "2", "3", "4"]
    assert "bad json at line 1" in lines[0] and "db down" in lines[1] and "ack-timeout" in lines[2]
    assert "worker-2" in lines[3] and "unrecoverable: schema v1" in lines[3]
    consumer.close()
    client.close()


def test_log_is_gone_once_the_message_is_acked(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = new_topic("attempts-ack")
    consumer = retry_consumer(client, broker, topic, "acker")
    client.create_producer(topic, batching_enabled=False).send(b"flaky")
    msg = consumer.receive(10_000)
    mid = message_id_text(msg)
    consumer.negative_acknowledge(msg, reason="timeout calling billing")
    msg = consumer.receive(10_000)
    consumer.negative_acknowledge(msg)  # no reason: still a nack
    msg = consumer.receive(10_000)
    log = read_log(broker, topic, mid)
    assert summary(log["attempts"]) == [("nack", "acker", "timeout calling billing"), ("nack", "acker", None)]
    consumer.acknowledge(msg)
    assert wait_until(lambda: read_log(broker, topic, mid)["acknowledged"], timeout=10)
    gone = read_log(broker, topic, mid)
    assert gone["attempts"] == [] and gone["source"] == "none"
    consumer.close()


def test_reasons_from_the_asyncio_consumer(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = new_topic("attempts-async")

    async def body(aclient: pulsar_asyncio.Client) -> str:
        consumer = await AsyncRetryConsumer.create(
            aclient, topic, SUB, enable_retry=False, admin_url=broker.admin_url, consumer_name="async-worker",
            dead_letter_policy=DeadLetterPolicy(max_redeliver_count=5), negative_ack_redelivery_delay_ms=20)
        producer = await aclient.create_producer(topic)
        await producer.send(b"poison")
        msg = await consumer.receive(10_000)
        mid = message_id_text(msg)
        await consumer.negative_acknowledge(msg, reason="async: upstream 503")
        msg = await consumer.receive(10_000)
        log = await asyncio.to_thread(read_log, broker, topic, mid)
        assert summary(log["attempts"]) == [("nack", "async-worker", "async: upstream 503")]
        await consumer.terminate(msg, "async: giving up")
        await producer.close()
        await consumer.close()
        return mid

    mid = run_async(broker, body)
    dead = dlq_messages(client, f"{topic}-{SUB}-DLQ", expect=1)
    assert len(dead) == 1
    props = dead[0].properties()
    assert summary(json.loads(props["DELIVERY_ATTEMPTS"])) == [
        ("nack", "async-worker", "async: upstream 503"), ("terminated", "async-worker", "async: giving up")]
    assert props["FAILURE_DESCRIPTION"] == "async: giving up"
    assert read_log(broker, topic, mid)["source"] == "dead-letter"


def test_bad_requests_get_clear_errors(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = new_topic("attempts-bad")
    consumer = client.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer(topic).send(b"x")
    mid = message_id_text(consumer.receive(10_000))
    ledger = mid.split(":")[0]

    def error(method: str, path: str, body: Any = None) -> tuple[int, str]:
        status, answer = http(broker, method, path, body)
        return status, str(answer.get("reason", ""))

    for bad in ("abc", "1:2:3:4:5", "1:x", "-1:2:-1:-1", "1:2:-5:-1"):
        status, reason = error("GET", attempts_path(topic, bad))
        assert status == 400, (bad, status, reason)
        assert "ledger:entry:partition:batchIndex" in reason or "-1 or more" in reason, (bad, reason)
    assert error("GET", attempts_path(topic + "-nope", mid))[0] == 404
    status, reason = error("GET", attempts_path(topic, mid, sub="nobody"))
    assert status == 404 and "nobody" in reason
    status, reason = error("GET", attempts_path(topic, f"{int(ledger) + 1000}:0:-1:-1"))
    assert status == 404 and "does not exist" in reason
    status, reason = error("GET", attempts_path(topic, f"{ledger}:99999:-1:-1"))
    assert status == 404
    path = attempts_path(topic, mid)
    assert error("POST", path, {"ending": "ack"})[0] == 400
    status, reason = error("POST", path, {"ending": "nack", "reason": "x" * 1001})
    assert status == 400 and "at most 1000" in reason
    status, reason = error("POST", path, {"ending": "nack", "why": "x"})
    assert status == 400 and "why" in reason
    assert error("POST", path, b"{not json")[0] == 400
    assert error("POST", path, {"ending": "nack", "reason": 5})[0] == 400
    assert http(broker, "POST", path, {"ending": "nack", "reason": "ok"}) == (200, {"announced": True})
    assert read_log(broker, topic, mid)["attempts"] == []  # an announcement alone is no attempt

    bad = admin(broker, "topics", "attempts", topic, SUB, "12-7")
    assert bad.exit_code == 2 and "LEDGER:ENTRY:PARTITION:BATCH_INDEX" in bad.stderr
    unknown = admin(broker, "topics", "attempts", topic, "nobody", mid)
    assert unknown.exit_code != 0 and "nobody" in unknown.stderr
    consumer.close()


def test_exclusive_nack_names_the_failed_message(broker: BrokerProcess, client: pulsar.Client) -> None:
    """On Exclusive the official client asks for every unacked message again on a nack; an
    announced nack makes the nacked message the only one with an attempt."""
    topic = new_topic("attempts-excl")
    consumer = RetryConsumer(client, topic, SUB, consumer_type=pulsar.ConsumerType.Exclusive, enable_retry=False,
                             admin_url=broker.admin_url, consumer_name="excl", negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(b"%d" % i)
    msgs = [consumer.receive(10_000) for _ in range(3)]
    ids = [message_id_text(m) for m in msgs]
    consumer.negative_acknowledge(msgs[1], reason="only this one")
    assert wait_until(lambda: read_log(broker, topic, ids[1])["attempts"], timeout=10)
    assert summary(read_log(broker, topic, ids[1])["attempts"]) == [("nack", "excl", "only this one")]
    assert read_log(broker, topic, ids[0])["attempts"] == []
    assert read_log(broker, topic, ids[2])["attempts"] == []
    consumer.close()
