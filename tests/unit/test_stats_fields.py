"""Pulsar's stats fields letterbox has no counter for: every answer gets its own nested values."""
from __future__ import annotations

from letterbox.admin import stats_fields


def test_fresh_copies_share_no_nested_value() -> None:
    for fields in (stats_fields.TOPIC, stats_fields.SUBSCRIPTION, stats_fields.INTERNAL):
        a, b = stats_fields.fresh(fields), stats_fields.fresh(fields)
        assert a == fields == b
        for key, value in a.items():
            if isinstance(value, dict | list):
                assert value is not b[key] and value is not fields[key], key
    a = stats_fields.fresh(stats_fields.SUBSCRIPTION)
    a["subscriptionProperties"]["x"] = "y"
    assert stats_fields.SUBSCRIPTION["subscriptionProperties"] == {}
