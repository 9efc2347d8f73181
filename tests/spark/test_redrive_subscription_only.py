"""Spark subscription-only redrive: Spark selects with SQL, the broker moves each selected
dead letter back into the subscription it died in (other subscriptions do not see it)."""
from __future__ import annotations

from typing import Any

import pytest

from letterbox.spark.redrive import redrive
from tests.admin.redrive_helpers import (
    backlog,
    dead_letter_in_s1,
    drain,
    live_dead_letters,
    two_subscriptions,
)
from tests.conftest import BrokerProcess
from tests.spark.conftest import unique

pytestmark = pytest.mark.letterbox_extension(
    "the subscription-only redrive is the broker's .../letterbox/redrive (no Apache Pulsar equivalent)")


def test_spark_subscription_only_redrive(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    base = spark_broker.admin_url
    topic = unique("sp-subonly")
    dlq = f"{topic}-S1-DLQ"
    two_subscriptions(base, topic)
    dead_letter_in_s1(base, pclient, topic, ["a", "b", "c", "d"], {"b", "c"})
    assert sorted(m["payloadText"] for m in live_dead_letters(base, dlq)) == ["b", "c"]
    assert backlog(base, topic, "S2") == 4

    where = "properties['payload'] = 'b'"
    first = redrive(spark, spark_broker.url, dlq, where=where, subscription_only=True, admin_url=base)
    assert first == {"selected": 1, "republished": 1}
    again = redrive(spark, spark_broker.url, dlq, where=where, subscription_only=True, admin_url=base)
    assert again == {"selected": 1, "republished": 0}  # moved once, never twice
    assert [m["payloadText"] for m in live_dead_letters(base, dlq)] == ["c"]
    assert backlog(base, topic, "S1") == 1 and backlog(base, topic, "S2") == 4
    assert [m.data() for m in drain(pclient, topic, "S1")] == [b"b"]

    with pytest.raises(ValueError, match="admin_url"):
        redrive(spark, spark_broker.url, dlq, subscription_only=True)
