"""The DLQ report's time buckets and label shortening (no Spark)."""
from __future__ import annotations

from letterbox.spark.dlq_chart import short_label, short_topic
from letterbox.spark.dlq_report import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    bucket_label,
    moment_label,
    time_bucket,
)


def test_time_bucket_follows_the_span() -> None:
    assert time_bucket(0) == ("second", 1_000)  # everything at one moment
    assert time_bucket(59_999) == ("second", 1_000)  # within a minute: seconds, not one bar
    assert time_bucket(60_000) == ("5 seconds", 5_000)
    assert time_bucket(5 * MINUTE_MS) == ("15 seconds", 15_000)
    assert time_bucket(15 * MINUTE_MS) == ("minute", MINUTE_MS)
    assert time_bucket(59 * MINUTE_MS) == ("minute", MINUTE_MS)
    assert time_bucket(61 * MINUTE_MS) == ("hour", HOUR_MS)
    assert time_bucket(2 * DAY_MS) == ("hour", HOUR_MS)
    assert time_bucket(3 * DAY_MS) == ("day", DAY_MS)
    assert time_bucket(400 * DAY_MS) == ("day", DAY_MS)


def test_bucket_labels() -> None:
    t = 1_767_261_600_000 + 5 * MINUTE_MS  # 2026-01-01 10:05 UTC
    assert bucket_label(t, "minute") == "2026-01-01 10:05"
    assert bucket_label(t, "hour") == "2026-01-01 10:00"
    assert bucket_label(t, "day") == "2026-01-01"
    assert bucket_label(t + 7_250, "5 seconds") == "2026-01-01 10:05:07"
    assert moment_label(t + 7_250, "second") == "2026-01-01 10:05:07.250"
    assert moment_label(t + 7_250, "hour") == "2026-01-01 10:05"


def test_short_label_wraps_and_ellipsises() -> None:
    assert short_label("TimeoutError: upstream") == "TimeoutError: upstream"
    long = "word " * 40
    label = short_label(long)
    lines = label.splitlines()
    assert len(lines) == 2 and all(len(line) <= 42 for line in lines) and label.endswith("…")
    assert short_label("x" * 100, 50, 1) == "x" * 49 + "…"
    assert short_label("a\n  b\tc") == "a b c"
    assert short_topic("persistent://public/default/orders") == "orders"
    assert short_topic("persistent://acme/prod/orders") == "acme/prod/orders"
