# Argument types and value parsers shared by the CLI groups. Each parser takes
# the text a person typed and returns the value an API call needs, or raises
# click.BadParameter saying what form is expected, so bad input becomes a
# usage error (exit 2) before any request is sent.
#
# Time forms (used by reset-cursor, dlq --since/--until):
#   10s 10m 1h 3d 2w 1y   that long ago (pulsar-admin's relative time)
#   1714557600000         epoch milliseconds (a bare integer)
#   2024-05-01T10:00:00Z  an ISO 8601 date-time (local time when no zone)
# Durations (expire-messages, set-message-ttl, set-retention --time) are a
# bare number of seconds or a number with one of the units above.
# Refused: a command line that cannot be meant (a filter that matches nothing by
# construction, an action on the wrong kind of topic, a confirmation nobody can
# give): one `Error: ...` line naming the fix, exit status 2, nothing sent that
# changes anything.
from __future__ import annotations

import re
import time
import urllib.parse
from datetime import datetime
from typing import Any

import click

from letterbox.errors import InvalidTopicName
from letterbox.failure import PolicyError, parse_duration_ms
from letterbox.topic_name import TopicName
from letterbox.usage_errors import OneLineUsageError

_SIZE_RE = re.compile(r"^(-?\d+)\s*([kmgt]?)b?$", re.IGNORECASE)
_SIZE_BYTES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_MESSAGE_ID_RE = re.compile(r"^(-?\d+):(-?\d+)(?::(-?\d+))?$")
TIME_HELP = "10m, 1h, 3d (that long ago), epoch milliseconds, or an ISO date-time"
# Pulsar's MessageId.earliest / MessageId.latest as (ledgerId, entryId).
EARLIEST = (-1, -1)
LATEST = (2**63 - 1, 2**63 - 1)


class Refused(click.ClickException):
    """A command line that cannot be meant: one line naming the fix, exit status 2."""

    exit_code = 2


class TopicParam(click.ParamType):  # type: ignore[type-arg]  # generic in newer click
    """`orders`, `acme/ops/orders` or `persistent://acme/ops/orders` -> TopicName."""

    name = "topic"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> TopicName:
        if isinstance(value, TopicName):
            return value
        try:
            return TopicName.parse(str(value))
        except InvalidTopicName as exc:
            self.fail(str(exc), param, ctx)


class NamespaceParam(click.ParamType):  # type: ignore[type-arg]  # generic in newer click
    """`tenant/namespace`, checked to have exactly two non-blank parts."""

    name = "tenant/namespace"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        parts = str(value).split("/")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            self.fail(f"expected TENANT/NAMESPACE (e.g. public/default), got {value!r}", param, ctx)
        return str(value)


class KeyValueParam(click.ParamType):  # type: ignore[type-arg]  # generic in newer click
    """`key=value` -> (key, value); the value may itself contain `=`."""

    name = "key=value"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, str]:
        if isinstance(value, tuple):
            return (str(value[0]), str(value[1]))
        key, sep, val = str(value).partition("=")
        if not sep or not key:
            self.fail(f"expected key=value, got {value!r}", param, ctx)
        return key, val


class FailureGroupParam(click.ParamType):  # type: ignore[type-arg]  # generic in newer click
    """A failure group's fingerprint (letterbox.failure.fingerprint), as `dlq groups` lists it."""

    name = "fingerprint"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from letterbox.failure.fingerprint import FINGERPRINT, FINGERPRINT_CHARS

        text = str(value).strip().lower()
        if not FINGERPRINT.fullmatch(text):
            self.fail(f"expected a failure group's fingerprint ({FINGERPRINT_CHARS} hex characters; "
                      f"`letterbox dlq groups DLQ_TOPIC` lists them), got {value!r}", param, ctx)
        return text


TOPIC = TopicParam()
NAMESPACE = NamespaceParam()
KEY_VALUE = KeyValueParam()
FAILURE_GROUP = FailureGroupParam()


def q(segment: str) -> str:
    """One URL path segment, fully escaped."""
    return urllib.parse.quote(segment, safe="")


def topic_path(name: TopicName) -> str:
    return name.admin_path


def namespace_path(ns: str) -> str:
    """`tenant/namespace` (as NAMESPACE gives it) -> its admin v2 path."""
    tenant, namespace = ns.split("/")
    return f"/admin/v2/namespaces/{q(tenant)}/{q(namespace)}"


def parse_duration_seconds(text: str, hint: str) -> int:
    """`30`, `30s`, `10m`, `1h`, `3d`, `2w`, `1y` -> seconds (negative allowed: -1 = infinite)."""
    try:
        ms = parse_duration_ms(text, allow_negative=True, whole=True)
    except PolicyError:
        ms = 1  # not whole seconds either: one message below
    if ms % 1000:
        raise click.BadParameter(
            f"{text!r}: use seconds or a number with a unit: 30s, 10m, 1h, 3d, 2w, 1y",
            param_hint=hint,
        )
    return ms // 1000


def parse_size_bytes(text: str, hint: str) -> int:
    """`4096` bytes, `10K`, `10M`, `16G`, `3T` -> bytes; `-1` (any negative): no limit."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise click.BadParameter(f"{text!r}: use bytes or 10K, 10M, 16G, 3T; -1 for no limit", param_hint=hint)
    n = int(m.group(1))
    return -1 if n < 0 else n * _SIZE_BYTES[m.group(2).lower()]


def parse_size_mb(text: str, hint: str) -> int:
    """pulsar-admin's retention size: `4096` bytes, `10M`, `16G`, `3T`, `-1` infinite -> MB."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise click.BadParameter(f"{text!r}: use bytes or 10K, 10M, 16G, 3T; -1 for no limit", param_hint=hint)
    n = int(m.group(1))
    if n < 0:
        return -1
    return n * _SIZE_BYTES[m.group(2).lower()] // (1 << 20)


def parse_time_ms(text: str, hint: str, now: float | None = None) -> int:
    """A point in time (see the module comment) -> epoch milliseconds."""
    raw = text.strip()
    if re.fullmatch(r"\d+", raw):
        return int(raw)
    if raw[-1:].isalpha() and not raw.startswith("-"):
        try:
            ago_ms = parse_duration_ms(raw, whole=True)
        except PolicyError:
            ago_ms = -1  # not a duration: maybe a date-time
        if ago_ms >= 0:
            now = time.time() if now is None else now
            when_ms = int((now - ago_ms / 1000) * 1000)
            if when_ms < 0:
                raise OneLineUsageError(f"{hint} {text.strip()[:40]} reaches back before 1970: give a shorter "
                                        "duration, or a date-time (2024-05-01T10:00:00Z)")
            return when_ms
    try:
        when = datetime.fromisoformat(raw)
        return int((when.astimezone() if when.tzinfo is None else when).timestamp() * 1000)
    except (OverflowError, OSError):
        raise OneLineUsageError(f"{hint} {text.strip()[:40]} is not a time this machine can represent: "
                                "give a date-time between 1970 and 9999") from None
    except ValueError:
        raise click.BadParameter(f"{text!r}: use {TIME_HELP} (2024-05-01T10:00:00Z)", param_hint=hint) from None


def parse_message_id(text: str, hint: str) -> tuple[int, int, int]:
    """`ledger:entry[:partition]`, `earliest` or `latest` -> (ledgerId, entryId, partitionIndex)."""
    raw = text.strip().lower()
    if raw == "earliest":
        return (*EARLIEST, -1)
    if raw == "latest":
        return (*LATEST, -1)
    m = _MESSAGE_ID_RE.match(raw)
    if not m:
        raise click.BadParameter(
            f"{text!r}: use LEDGER:ENTRY (as in `peek-messages` output), earliest or latest",
            param_hint=hint,
        )
    return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) is not None else -1
