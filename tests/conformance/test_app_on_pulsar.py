"""letterbox's application side on Apache Pulsar itself: the tests that check RetryConsumer,
AsyncRetryConsumer, the consumer-property policies and the Spark redrive against a letterbox
started --pulsar-compatible-only (tests/client/test_pulsar_fallback.py) run here unchanged
against the reference Apache Pulsar. `compat_broker` is the reference; `letterbox_broker` the
letterbox of the differential run (extensions on). What passes here works on Pulsar as written;
docs/migrate.md's table says the same, command by command."""
from __future__ import annotations

import pytest

from tests.client.test_pulsar_fallback import (
    test_async_retry_consumer_falls_back,
    test_extension_routes_answer_404_and_pulsar_routes_work,
    test_letterbox_consumer_properties_are_ignored,
    test_retry_consumer_falls_back_to_produce_then_acknowledge,
    test_spark_subscription_only_redrive_names_the_missing_extension,
)
from tests.conformance.targets import Running, Target

__all__ = [
    "test_async_retry_consumer_falls_back",
    "test_extension_routes_answer_404_and_pulsar_routes_work",
    "test_letterbox_consumer_properties_are_ignored",
    "test_retry_consumer_falls_back_to_produce_then_acknowledge",
    "test_spark_subscription_only_redrive_names_the_missing_extension",
]


@pytest.fixture(scope="module")
def compat_broker(reference: Target) -> Running:
    return Running(reference.service_url, reference.admin_url)


@pytest.fixture(scope="module")
def letterbox_broker(letterbox_target: Target) -> Running:
    return Running(letterbox_target.service_url, letterbox_target.admin_url)
