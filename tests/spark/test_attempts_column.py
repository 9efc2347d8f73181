"""The Spark source's delivery_attempts column when reading a dead letter topic: each dead
letter's DELIVERY_ATTEMPTS as an array of structs (endings, consumers, times); a source
topic read has no such column."""
from __future__ import annotations

import time
from typing import Any

import pulsar
import pytest

from tests.conftest import BrokerProcess
from tests.spark.conftest import unique

pytestmark = pytest.mark.letterbox_extension(
    "delivery_attempts comes from DELIVERY_ATTEMPTS, stamped by letterbox's broker-side dead-letter move and attempt log")


def test_dead_letter_topic_read_has_the_attempt_log(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = f"persistent://public/default/{unique('spark-attempts')}"
    consumer = pclient.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared, consumer_name="spark-w",
                                 properties={"letterbox.dlq.max_redeliveries": "1"},
                                 negative_ack_redelivery_delay_ms=20)
    pclient.create_producer(topic, batching_enabled=False).send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(10_000))
    dlq = f"{topic}-work-DLQ"
    reader = spark.read.format("letterbox").option("service_url", spark_broker.url)
    deadline = time.time() + 30
    rows: list[Any] = []
    while not rows and time.time() < deadline:
        rows = reader.option("topic", dlq).load().collect()
    assert len(rows) == 1
    attempts = rows[0]["delivery_attempts"]
    assert [(a["ending"], a["consumer"]) for a in attempts] == [("nack", "spark-w"), ("nack", "spark-w")]
    assert all(a["address"].startswith("127.0.0.1:") and a["delivered_at"] <= a["ended_at"] for a in attempts)
    assert attempts[0]["reason"] is None
    assert "delivery_attempts" not in reader.option("topic", topic).load().columns
    consumer.close()
