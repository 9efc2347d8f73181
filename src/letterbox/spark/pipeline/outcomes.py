# What a pipeline handler sees (Record) and what it returns: any value is a
# success (its output goes to the sink), Retry asks for the record again
# later, Fail sends it straight to the dead letter topic (PIP-372's
# terminate). An exception raised by the handler counts as Retry with the
# exception's text as the error.
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Record:
    key: str | None
    value: bytes
    properties: dict[str, str]
    topic: str  # the topic the record was first published to (REAL_TOPIC on retries)
    message_id: str  # its first message id, `ledger:entry:partition:batchIndex` (ORIGIN_MESSAGE_ID)
    attempt: int  # 0 for the first processing, then RECONSUMETIMES
    publish_time: datetime | None = None
    event_time: datetime | None = None


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
