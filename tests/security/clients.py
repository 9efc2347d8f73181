"""What the security tests share on the client side: the official client with
short timeouts and a quiet logger, a produce-then-consume round trip, and an
SSL context trusting a test CA."""
from __future__ import annotations

import ssl
from typing import Any

import pulsar

from tests.conftest import _quiet_logger
from tests.security.pki import Pki


def official_client(url: str, **options: Any) -> pulsar.Client:
    """pulsar.Client(url, **options) with a 10 s operation and 5 s connection timeout."""
    return pulsar.Client(url, **{"operation_timeout_seconds": 10, "connection_timeout_ms": 5000,
                                 "logger": _quiet_logger(), **options})


def round_trip(client: pulsar.Client, topic: str, payload: bytes) -> None:
    """Subscribe, produce `payload`, receive exactly it and acknowledge it."""
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(payload)
    msg = consumer.receive(10_000)
    assert msg.data() == payload
    consumer.acknowledge(msg)


def trusting(pki: Pki) -> ssl.SSLContext:
    """A client SSL context that trusts the test CA (hostname checked)."""
    return ssl.create_default_context(cafile=str(pki.ca))
