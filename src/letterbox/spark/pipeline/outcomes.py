# What a pipeline handler sees (Record) and what it returns: any value is a
# success (its output goes to the sink), Retry asks for the record again
# later, Fail sends it straight to the dead letter topic (PIP-372's
# terminate). An exception raised by the handler counts as Retry with the
# exception's text as the error.
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime


class Record:
    """One record as the handler sees it (a plain slotted class: one is made per record)."""

    __slots__ = ("attempt", "event_time_ms", "key", "message_id", "properties", "publish_time_ms", "topic", "value")

    def __init__(
        self,
        key: str | None,
        value: bytes,
        properties: dict[str, str],
        topic: str,
        message_id: str,
        attempt: int,
        publish_time_ms: int | None = None,
        event_time_ms: int | None = None,
    ) -> None:
        self.key = key
        self.value = value
        self.properties = properties
        self.topic = topic  # the topic the record was first published to (REAL_TOPIC on retries)
        self.message_id = message_id  # its first message id, `ledger:entry:partition:batchIndex`
        self.attempt = attempt  # 0 for the first processing, then RECONSUMETIMES
        self.publish_time_ms = publish_time_ms
        self.event_time_ms = event_time_ms

    @property
    def publish_time(self) -> datetime | None:
        return _utc(self.publish_time_ms)

    @property
    def event_time(self) -> datetime | None:
        return _utc(self.event_time_ms)

    def __repr__(self) -> str:
        return f"Record(topic={self.topic!r}, message_id={self.message_id!r}, attempt={self.attempt}, key={self.key!r})"


def _utc(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass(frozen=True)
class Retry:
    """Process the record again later: after `delay` seconds, at delay `level`, or per the policy."""

    delay: float | None = None
    level: int | None = None
    error: str = ""


@dataclass(frozen=True)
class Fail:
    """A terminal failure: the record goes to the dead letter topic now, with this reason text."""

    error: str = ""
    details: dict[str, str] = field(default_factory=dict)
