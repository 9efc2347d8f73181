"""The CLI's value parsers: what people type -> what the API gets (no broker)."""
from __future__ import annotations

import click
import pytest

from letterbox.cli.params import (
    LATEST,
    TOPIC,
    parse_duration_seconds,
    parse_message_id,
    parse_size_mb,
    parse_time_ms,
    topic_path,
)
from letterbox.topic_name import TopicName

NOW = 1_700_000_000.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 30), ("30s", 30), ("10m", 600), ("2h", 7200), ("3d", 3 * 86400), ("1w", 7 * 86400),
    ("-1", -1), ("0", 0),
])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration_seconds(text, "-t") == seconds


@pytest.mark.parametrize("text", ["", "ten", "10x", "1.5h", "h"])
def test_bad_durations_say_the_expected_form(text: str) -> None:
    with pytest.raises(click.BadParameter, match="30s, 10m, 1h"):
        parse_duration_seconds(text, "-t")


@pytest.mark.parametrize(("text", "mb"), [("10M", 10), ("16G", 16 * 1024), ("1T", 1024 * 1024),
                                          ("4096", 0), ("2097152", 2), ("-1", -1), ("512k", 0)])
def test_retention_sizes(text: str, mb: int) -> None:
    assert parse_size_mb(text, "-s") == mb


def test_relative_time_is_that_long_ago() -> None:
    assert parse_time_ms("10m", "-t", now=NOW) == int((NOW - 600) * 1000)
    assert parse_time_ms("1h", "-t", now=NOW) == int((NOW - 3600) * 1000)


def test_bare_integer_time_is_epoch_ms() -> None:
    assert parse_time_ms("1714557600000", "-t") == 1714557600000


def test_iso_time_with_zone() -> None:
    assert parse_time_ms("2024-05-01T10:00:00+00:00", "-t") == 1714557600000


def test_bad_time_names_the_forms() -> None:
    with pytest.raises(click.BadParameter, match="epoch milliseconds"):
        parse_time_ms("yesterday", "-t")


def test_message_ids() -> None:
    assert parse_message_id("3:17", "-m") == (3, 17, -1)
    assert parse_message_id("3:17:2", "-m") == (3, 17, 2)
    assert parse_message_id("earliest", "-m") == (-1, -1, -1)
    assert parse_message_id("latest", "-m") == (*LATEST, -1)
    with pytest.raises(click.BadParameter, match="LEDGER:ENTRY"):
        parse_message_id("3-17", "-m")


def test_short_topic_names_expand_and_quote() -> None:
    short = TOPIC.convert("orders", None, None)
    assert str(short) == "persistent://public/default/orders"
    assert topic_path(short) == "/admin/v2/persistent/public/default/orders"
    odd = TopicName.parse("persistent://acme/ops/a b%c")
    assert topic_path(odd) == "/admin/v2/persistent/acme/ops/a%20b%25c"
