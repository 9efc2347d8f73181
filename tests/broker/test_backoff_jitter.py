"""Backoff jitter over TCP on the manual clock: with `letterbox.backoff.jitter=equal` a nacked
message waits between half and all of its backoff (60 s here): not back before +30 s, back by
+60 s; a misspelt jitter refuses the subscribe."""
from __future__ import annotations

import uuid
from pathlib import Path

import pulsar
import pytest

from tests.broker.test_circuit_breaker import advance
from tests.broker.test_manual_clock import MANUAL, nothing_within
from tests.conftest import BrokerProcess


def test_equal_jitter_keeps_the_delay_between_half_and_all(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=MANUAL).start()
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/jitter-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=10,
                                    properties={"letterbox.backoff.min_ms": "60000",
                                                "letterbox.backoff.jitter": "equal"})
        client.create_producer(topic).send(b"m")
        consumer.negative_acknowledge(consumer.receive(5000))
        nothing_within(consumer, 300)
        advance(b, 29_999)
        nothing_within(consumer, 300)
        advance(b, 30_001)
        assert consumer.receive(5000).redelivery_count() == 1
        with pytest.raises(pulsar.exceptions.NotAllowedError):
            client.subscribe(topic, "typo", properties={"letterbox.backoff.min_ms": "100",
                                                        "letterbox.backoff.jitter": "half"})
    finally:
        client.close()
        b.stop()
