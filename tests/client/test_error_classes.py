"""Error classes from letterbox.client (failure/error_classes.py): a ValueError mapped
non-retryable goes to the DLQ on its first failure with reason `non-retryable`, its class
in the attempt log and FAILURE_ERROR_CLASS; a TimeoutError (a subclass, as Python sees it)
mapped retry-after 30 s comes back at +30 s of broker clock, not before; the asyncio
consumer announces the same; bad arguments are refused before anything is sent."""
from __future__ import annotations

import json
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from letterbox.client import (
    AsyncRetryConsumer,
    DeadLetterPolicy,
    ErrorRule,
    RetryConsumer,
    dead_letter_topic_name,
)
from letterbox.failure import PolicyError
from tests.admin.helpers import call
from tests.broker.test_manual_clock import MANUAL
from tests.client.test_async_retry_consumer import run as run_async
from tests.client.test_retry_consumer import dlq_messages, new_topic
from tests.conftest import BrokerProcess, _quiet_logger

pytestmark = pytest.mark.letterbox_extension("error classes ride on letterbox's nack announcements")

RULES = {"ValueError": ErrorRule(non_retryable=True), "TimeoutError": ErrorRule.retry_after(30)}


class DbTimeout(TimeoutError):
    """Matched by the TimeoutError rule through its MRO."""


def fail_with(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # a real traceback for the fingerprint
        return caught


@pytest.fixture(scope="module")
def manual_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("errors") / "data", args=MANUAL).start()
    yield b
    b.stop()


def advance(b: BrokerProcess, ms: int) -> None:
    status, body = call(b.admin_url, "POST", f"/admin/v2/letterbox/clock/advance?ms={ms}")
    assert status == 200, body


def test_non_retryable_dead_letters_on_first_failure_and_retry_after_waits_30s(manual_broker: BrokerProcess) -> None:
    b = manual_broker
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = new_topic("errclass")
        consumer = RetryConsumer(client, topic, "work", enable_retry=False, admin_url=b.admin_url,
                                 dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3), error_classes=RULES,
                                 negative_ack_redelivery_delay_ms=10)
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"bad")
        producer.send(b"slow")
        for _ in range(2):
            msg = consumer.receive(10_000)
            if msg.data() == b"bad":
                consumer.negative_acknowledge(msg, error=fail_with(ValueError("field 'amount' is -3")))
            else:
                consumer.negative_acknowledge(msg, error=fail_with(DbTimeout("db took 5 s")))
        [dead] = dlq_messages(client, dead_letter_topic_name(topic, "work"), 1)
        props = dead.properties()
        assert dead.data() == b"bad"
        assert props["DEAD_LETTER_REASON"] == "non-retryable"
        assert props["FAILURE_ERROR_CLASS"] == "ValueError"
        assert props["FAILURE_DESCRIPTION"] == "field 'amount' is -3"
        [attempt] = json.loads(props["DELIVERY_ATTEMPTS"])
        assert attempt["errorClass"] == "ValueError" and len(attempt["fingerprint"]) == 12
        with pytest.raises(pulsar.Timeout):  # "slow" waits 30 s of broker time
            consumer.receive(400)
        advance(b, 29_900)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(400)
        advance(b, 100)
        again = consumer.receive(5000)
        assert again.data() == b"slow" and again.redelivery_count() == 1
        consumer.acknowledge(again)
        consumer.close()
    finally:
        client.close()


def test_async_consumer_records_the_class_and_a_stable_fingerprint(manual_broker: BrokerProcess) -> None:
    b = manual_broker
    topic = new_topic("errclass-async")

    async def body(aclient: pulsar_asyncio.Client) -> list[dict[str, Any]]:
        consumer = await AsyncRetryConsumer.create(
            aclient, topic, "work", enable_retry=False, admin_url=b.admin_url, error_classes=RULES,
            dead_letter_policy=DeadLetterPolicy(max_redeliver_count=5), negative_ack_redelivery_delay_ms=10)
        producer = await aclient.create_producer(topic)
        await producer.send(b"m")
        for _ in range(2):
            msg = await consumer.receive(10_000)
            await consumer.negative_acknowledge(msg, error=fail_with(KeyError("id 7")))
        msg = await consumer.receive(10_000)
        mid = msg.message_id()
        status, log = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/")
                           + f"/subscription/work/letterbox/attempts/{mid.ledger_id()}:{mid.entry_id()}")
        assert status == 200, log
        await consumer.acknowledge(msg)
        await consumer.close()
        return log["attempts"]  # type: ignore[no-any-return]

    attempts = run_async(b, body)
    assert [a["errorClass"] for a in attempts] == ["KeyError", "KeyError"]
    assert attempts[0]["fingerprint"] == attempts[1]["fingerprint"]  # same frames, same fingerprint
    assert attempts[0]["reason"] == "'id 7'"


def test_bad_arguments_are_refused_naming_them() -> None:
    with pytest.raises(PolicyError, match="retry_after"):
        ErrorRule.retry_after(0)
    with pytest.raises(PolicyError, match="max_attempts"):
        ErrorRule(max_attempts=0)
    from letterbox.failure.error_classes import check_rules, match_rule
    with pytest.raises(PolicyError, match="ErrorRule"):
        check_rules({"ValueError": "non-retryable"})  # type: ignore[dict-item]
    assert match_rule(DbTimeout, RULES) == ("TimeoutError", RULES["TimeoutError"])
    assert match_rule(LookupError, RULES) is None


def test_announcement_with_a_bad_error_field_is_refused_naming_it(manual_broker: BrokerProcess) -> None:
    b = manual_broker
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = new_topic("errclass-bad")
        consumer = client.subscribe(topic, "work")
        client.create_producer(topic).send(b"m")
        mid = consumer.receive(5000).message_id()
        path = ("/admin/v2/" + topic.replace("://", "/")
                + f"/subscription/work/letterbox/attempts/{mid.ledger_id()}:{mid.entry_id()}")
        for body, named in (({"ending": "nack", "errorClass": 5}, "errorClass"),
                            ({"ending": "nack", "fingerprint": "ab"}, "fingerprint needs errorClass"),
                            ({"ending": "nack", "rule": {"retryAfterMs": 0}}, "retry_after"),
                            ({"ending": "nack", "rule": {"later": 1}}, "later")):
            status, answer = call(b.admin_url, "POST", path, json.dumps(body))
            assert status == 400 and named in answer["reason"], (body, answer)
        status, answer = call(b.admin_url, "POST", path, json.dumps(
            {"ending": "nack", "errorClass": "ValueError", "fingerprint": "0123abcd4567",
             "rule": {"nonRetryable": True}}))
        assert status == 200 and answer == {"announced": True}
    finally:
        client.close()


def test_non_retryable_failures_of_many_messages_are_not_an_outage(manual_broker: BrokerProcess) -> None:
    b = manual_broker
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        topic = new_topic("errclass-many")
        consumer = RetryConsumer(client, topic, "work", enable_retry=False, admin_url=b.admin_url,
                                 dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3), error_classes=RULES,
                                 negative_ack_redelivery_delay_ms=10,
                                 properties={"letterbox.circuit.enabled": "true"})
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(b"bad%d" % i)
        for _ in range(30):
            consumer.negative_acknowledge(consumer.receive(10_000), error=fail_with(ValueError("bad row")))
        dead = dlq_messages(client, dead_letter_topic_name(topic, "work"), 30)
        assert len(dead) == 30 and {m.properties()["DEAD_LETTER_REASON"] for m in dead} == {"non-retryable"}
        status, state = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/")
                             + "/subscription/work/letterbox/circuit")
        assert status == 200 and state["state"] == "closed" and state["trips"] == 0
        consumer.close()
    finally:
        client.close()
