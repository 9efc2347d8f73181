"""Acceptance (issue 12): a message dead-lettered by a RetryConsumer, redriven by the Spark
redrive job, gets every retry again (the same stamps table as the admin redrive)."""
from __future__ import annotations

from typing import Any

from letterbox.client import DeadLetterPolicy, DelayLevels, RetryConsumer, dead_letter_topic_name
from letterbox.spark.redrive import redrive
from tests.client.retry_helpers import MAX_RETRIES, dead_letters, retries_until_dead_lettered
from tests.conftest import BrokerProcess
from tests.spark.conftest import unique


def test_spark_redrive_gives_fresh_retries(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = "persistent://public/default/" + unique("spark-redrive-retries")
    dlq = dead_letter_topic_name(topic, "s")
    consumer = RetryConsumer(pclient, topic, "s", admin_url=spark_broker.admin_url,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=MAX_RETRIES),
                             delay_levels=DelayLevels("100ms"))
    try:
        producer = pclient.create_producer(topic)
        producer.send(b"poison", properties={"app": "billing"})
        producer.close()
        fresh = [None, "1", "2", "3"]
        assert retries_until_dead_lettered(consumer, b"poison") == fresh
        first = dead_letters(pclient, dlq)
        assert first.properties()["RECONSUMETIMES"] == str(MAX_RETRIES)

        assert redrive(spark, spark_broker.url, dlq) == {"selected": 1, "republished": 1}

        assert retries_until_dead_lettered(consumer, b"poison") == fresh
        again = dead_letters(pclient, dlq, frozenset({str(first.message_id())})).properties()
        assert again["RECONSUMETIMES"] == str(MAX_RETRIES) and again["app"] == "billing"
        assert again["ORIGIN_MESSAGE_ID"] == first.properties()["ORIGIN_MESSAGE_ID"]
    finally:
        consumer.close()
