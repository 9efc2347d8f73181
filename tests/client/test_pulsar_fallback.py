"""Issue 15 item 8: a broker started --pulsar-compatible-only behaves as Apache Pulsar (extension
routes 404, letterbox.* consumer properties ignored, no broker-side dead-letter policy), and
RetryConsumer / AsyncRetryConsumer detect it and fall back to produce-then-acknowledge, saying
so once in their log."""
from __future__ import annotations

import asyncio
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pulsar
import pulsar.asyncio as pulsar_asyncio
import pytest

from letterbox.client import AsyncRetryConsumer, DeadLetterPolicy, RetryConsumer, message_id_text
from letterbox.client.produce_moves import FALLBACK_LOG
from tests.conftest import BrokerProcess

NS = "persistent://public/default/"


def new_topic(prefix: str) -> str:
    return f"{NS}{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def compat_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("compat") / "data", args=["--pulsar-compatible-only"]).start()
    yield b
    assert b.stop() == 0, b.log()


@pytest.fixture(scope="module")
def letterbox_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("full") / "data",
                      env={"LETTERBOX_PULSAR_COMPATIBLE_ONLY": "false"}).start()
    yield b
    assert b.stop() == 0, b.log()


def _client(b: BrokerProcess) -> pulsar.Client:
    quiet = logging.getLogger("tests.pulsar-client")
    quiet.setLevel(logging.ERROR)
    return pulsar.Client(b.url, operation_timeout_seconds=10, logger=quiet)


def _status(url: str, method: str = "GET", body: bytes | None = None) -> int:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_extension_routes_answer_404_and_pulsar_routes_work(compat_broker: BrokerProcess) -> None:
    topic = new_topic("routes")
    client = _client(compat_broker)
    client.subscribe(topic, "s").close()
    name = topic.removeprefix(NS)
    base = f"{compat_broker.admin_url}/admin/v2/persistent/public/default/{name}"
    extensions = [
        ("GET", f"{compat_broker.admin_url}/admin/v2/namespaces/public/default/letterbox/deadLetterTopics"),
        ("POST", f"{base}/subscription/s/letterbox/move"),
        ("POST", f"{base}/subscription/s/letterbox/attempts/1:0:-1:-1"),
        ("GET", f"{base}/letterbox/deadLetters"),
        ("POST", f"{base}/letterbox/redrive"),
        ("GET", f"{base}/subscription/s/letterbox/poison-suspects"),
        ("POST", f"{compat_broker.admin_url}/admin/v2/namespaces/public/default/letterbox/deadLetterPolicy"),
        ("GET", f"{compat_broker.admin_url}/admin/v2/letterbox/clock"),
    ]
    for method, url in extensions:
        assert _status(url, method, b"{}" if method == "POST" else None) == 404, (method, url)
    assert _status(f"{base}/stats") == 200
    client.create_producer(f"{NS}letterbox").close()  # a topic named "letterbox" is no extension route
    assert _status(f"{compat_broker.admin_url}/admin/v2/persistent/public/default/letterbox/stats") == 200
    assert _status(f"{compat_broker.admin_url}/admin/v2/namespaces/public/default/topics") == 200
    if isinstance(compat_broker, BrokerProcess):  # (tests/conformance runs this against Apache Pulsar too)
        assert "pulsar-compatible-only: letterbox extensions are off" in compat_broker.log()
    client.close()


def test_letterbox_consumer_properties_are_ignored(compat_broker: BrokerProcess,
                                                   letterbox_broker: BrokerProcess) -> None:
    bad = {"letterbox.dlq.max_redeliveries": "many"}
    full = _client(letterbox_broker)
    with pytest.raises(pulsar.NotAllowedError):  # letterbox refuses a bad policy ...
        full.subscribe(new_topic("props"), "s", properties=bad)
    full.close()
    client = _client(compat_broker)
    client.subscribe(new_topic("props"), "s", properties=bad).close()  # ... Pulsar ignores unknown properties
    # a valid policy is ignored too: nacks redeliver past it, nothing is dead-lettered by the broker
    topic = new_topic("nodlq")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100,
                                properties={"letterbox.dlq.max_redeliveries": "1"})
    client.create_producer(topic).send(b"m")
    counts = []
    for _ in range(4):
        msg = consumer.receive(10_000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2, 3]
    consumer.close()
    assert f"{topic}-s-DLQ".removeprefix(NS) not in client.get_topic_partitions(topic)[0]
    stats = _status(f"{compat_broker.admin_url}/admin/v2/persistent/public/default/"
                    f"{topic.removeprefix(NS)}-s-DLQ/stats")
    assert stats == 404  # no dead letter topic was made
    client.close()


def _fallback_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if FALLBACK_LOG in r.getMessage()]


def test_retry_consumer_falls_back_to_produce_then_acknowledge(compat_broker: BrokerProcess,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="letterbox.client")
    client = _client(compat_broker)
    topic = new_topic("fallback")
    consumer = RetryConsumer(client, topic, "s", admin_url=compat_broker.admin_url,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3),
                             negative_ack_redelivery_delay_ms=100)
    assert consumer.atomic_moves is False
    assert len(_fallback_logs(caplog)) == 1
    client.create_producer(topic).send(b"a", properties={"app": "1"}, partition_key="k-a", event_timestamp=1234)
    msg = consumer.receive(10_000)
    origin = message_id_text(msg)
    consumer.negative_acknowledge(msg, reason="flaky")  # no announcement on Pulsar: silently skipped
    assert not [r for r in caplog.records if "not announced" in r.getMessage()]
    msg = consumer.receive(10_000)
    moved_at = time.monotonic()
    consumer.reconsume_later(msg, timedelta(seconds=2))
    retried = consumer.receive(15_000)
    # deliver_after on the retry topic; Apache Pulsar hands a delayed message out up to its
    # delayedDeliveryTickTimeMillis (1 s by default) early, letterbox at the time asked
    assert time.monotonic() - moved_at >= 0.9
    props = retried.properties()
    assert retried.topic_name() == f"{topic}-s-RETRY"
    assert (props["REAL_TOPIC"], props["ORIGIN_MESSAGE_ID"], props["RECONSUMETIMES"], props["DELAY_TIME"],
            props["app"]) == (topic, origin, "1", "2000", "1")
    assert (retried.data(), retried.partition_key(), retried.event_timestamp()) == (b"a", "k-a", 1234)
    assert retried.producer_name().endswith("-RETRY")
    consumer.terminate(retried, "bad input")
    reader = client.create_reader(f"{topic}-s-DLQ", pulsar.MessageId.earliest)
    dead = reader.read_next(10_000)
    dprops = dead.properties()
    assert (dprops["DEAD_LETTER_REASON"], dprops["DEAD_LETTER_DESCRIPTION"], dprops["REAL_TOPIC"],
            dprops["ORIGIN_MESSAGE_ID"]) == ("terminated", "bad input", topic, origin)
    assert dead.producer_name().endswith("-DLQ") and dead.partition_key() == "k-a"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1_000)  # acknowledged after each produce: nothing comes back
    assert (consumer.counters.reconsumed, consumer.counters.terminated, consumer.counters.nacked) == (1, 1, 1)
    assert len(_fallback_logs(caplog)) == 1  # said once
    reader.close()
    consumer.close()
    client.close()


def test_letterbox_broker_keeps_the_atomic_move(letterbox_broker: BrokerProcess,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="letterbox.client")
    client = _client(letterbox_broker)
    consumer = RetryConsumer(client, new_topic("atomic"), "s", admin_url=letterbox_broker.admin_url)
    assert consumer.atomic_moves is True and not _fallback_logs(caplog)
    consumer.close()
    client.close()


def test_async_retry_consumer_falls_back(compat_broker: BrokerProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="letterbox.client")
    topic = new_topic("async-fallback")

    async def body() -> tuple[dict[str, str], dict[str, str]]:
        aclient = pulsar_asyncio.Client(compat_broker.url)
        try:
            consumer = await AsyncRetryConsumer.create(
                aclient, topic, "s", admin_url=compat_broker.admin_url,
                dead_letter_policy=DeadLetterPolicy(max_redeliver_count=1), negative_ack_redelivery_delay_ms=100)
            assert consumer.atomic_moves is False
            producer = await aclient.create_producer(topic)
            await producer.send(b"x")
            msg = await consumer.receive(10_000)
            await consumer.reconsume_later(msg, timedelta(seconds=1))
            retried = await consumer.receive(15_000)
            await consumer.negative_acknowledge(retried, "boom")  # redelivery 1: still handed out
            again = await consumer.receive(10_000)
            assert again.redelivery_count() == 1
            await consumer.negative_acknowledge(again)  # redelivery 2 > 1: dead-lettered on receipt
            with pytest.raises(pulsar.Timeout):
                await consumer.receive(2_000)
            await consumer.close()
            await producer.close()
            return retried.properties(), {}
        finally:
            await aclient.close()

    retried_props, _ = asyncio.run(body())
    assert retried_props["RECONSUMETIMES"] == "1" and retried_props["REAL_TOPIC"] == topic
    client = _client(compat_broker)
    dead = client.create_reader(f"{topic}-s-DLQ", pulsar.MessageId.earliest).read_next(10_000)
    assert dead.properties()["DEAD_LETTER_REASON"] == "max-redeliveries" and dead.data() == b"x"
    client.close()
    assert len(_fallback_logs(caplog)) == 1


def test_spark_subscription_only_redrive_names_the_missing_extension(compat_broker: BrokerProcess) -> None:
    """The one Spark job with no Pulsar equivalent fails with an error that says so."""
    from letterbox.auth_options import AuthOptions
    from letterbox.spark.redrive import _admin_redrive

    dlq = new_topic("orders") + "-s-DLQ"
    client = _client(compat_broker)
    client.create_producer(dlq).close()
    with pytest.raises(RuntimeError, match=r"HTTP 404.*no subscription-only redrive.*without subscription_only"):
        _admin_redrive(compat_broker.admin_url, dlq, ["1:0:-1:-1"], AuthOptions())
    client.close()
