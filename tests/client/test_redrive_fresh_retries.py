"""Acceptance (issue 12): a message dead-lettered by a RetryConsumer, redriven through the admin
API, gets every retry again — the redrive drops RECONSUMETIMES and the other retry stamps."""
from __future__ import annotations

import json
import uuid

import pulsar
import pytest

from letterbox.client import DeadLetterPolicy, DelayLevels, RetryConsumer, dead_letter_topic_name
from tests.admin.helpers import call
from tests.client.retry_helpers import MAX_RETRIES, dead_letters, retries_until_dead_lettered
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.letterbox_extension(
    "redrives through the admin route .../letterbox/redrive, a letterbox extension (Apache Pulsar has no redrive)")

FRESH = [None, "1", "2", "3"]


def test_admin_redrive_gives_fresh_retries(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/redrive-retries-{uuid.uuid4().hex[:8]}"
    dlq = dead_letter_topic_name(topic, "s")
    consumer = RetryConsumer(client, topic, "s", admin_url=broker.admin_url,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=MAX_RETRIES),
                             delay_levels=DelayLevels("100ms"))
    try:
        producer = client.create_producer(topic)
        producer.send(b"poison", properties={"app": "billing"})
        producer.close()
        assert retries_until_dead_lettered(consumer, b"poison") == FRESH
        first = dead_letters(client, dlq)
        dead = first.properties()
        assert dead["RECONSUMETIMES"] == str(MAX_RETRIES) and dead["DEAD_LETTER_REASON"] == "max-redeliveries"

        path = "/admin/v2/persistent/" + dlq.removeprefix("persistent://") + "/letterbox/redrive"
        status, result = call(broker.admin_url, "POST", path, json.dumps({"reason": "max-redeliveries"}))
        assert (status, result["moved"]) == (200, 1), result

        # the redriven message comes back with its origin and the user's properties only
        assert retries_until_dead_lettered(consumer, b"poison") == FRESH
        again = dead_letters(client, dlq, frozenset({str(first.message_id())})).properties()
        assert again["RECONSUMETIMES"] == str(MAX_RETRIES) and again["app"] == "billing"
        assert again["REAL_TOPIC"] == topic and again["ORIGIN_MESSAGE_ID"] == dead["ORIGIN_MESSAGE_ID"]
    finally:
        consumer.close()
