# The delivery attempt log's vocabulary: one
# Attempt is one delivery of a message that did not end in an
# acknowledgement — when it was delivered, to which consumer (name and
# address), how it ended and, where the client said it, why.
#
# Pure: no I/O. The broker records attempts on failure events only (nack, ack
# timeout, consumer gone, terminate, expiry); the ending is mapped here from
# the failure core's Event types (ending_for). The storage keeps each
# message's attempts as compact JSON rows (`encode_rows` / `decode_rows`):
#     [delivered_at_ms, ended_at_ms, consumer, address, ending, reason]
# with 0 for an unknown time and null for no reason, and two more values,
# [..., error_class, fingerprint], when a letterbox.client consumer named the
# exception it failed with (error_classes.py); a dead letter carries
# them as the DELIVERY_ATTEMPTS property (`attempts_property`: a JSON list of
# objects with the REST field names).
# Invariants: a log holds at most its limit of attempts, the oldest dropped
# first; a reason is at most MAX_REASON_CHARS characters, a consumer name at
# most MAX_NAME_CHARS (clip_name), so a row never grows with what a client sent;
# DELIVERY_ATTEMPTS holds the newest attempts within MAX_ATTEMPTS_STAMP_BYTES.
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string
from typing import Any

from letterbox.failure.decide import (
    AckTimeout,
    ConsumerGone,
    Event,
    Expired,
    Nack,
    PipelineFail,
    RedeliverAll,
    Terminate,
)

ACK = "ack"
NACK = "nack"
ACK_TIMEOUT = "ack-timeout"
CONSUMER_GONE = "consumer-gone"
TERMINATED = "terminated"
EXPIRED = "expired"
# the circuit breaker's rows (circuit.py): a trip (on the messages whose failures in the
# window were given back), the probe sent in half-open, and the close
CIRCUIT_TRIP = "circuit-open"
CIRCUIT_PROBE = "circuit-probe"
CIRCUIT_CLOSE = "circuit-closed"  # on the messages of the trip still unacknowledged when it closes
ENDINGS = (ACK, NACK, ACK_TIMEOUT, CONSUMER_GONE, TERMINATED, EXPIRED, CIRCUIT_TRIP, CIRCUIT_PROBE, CIRCUIT_CLOSE)
# the endings a client announces before it performs them (a terminate's reason
# travels with its move instead)
ANNOUNCED_ENDINGS = (NACK,)

DEFAULT_ATTEMPT_LOG_SIZE = 10
MAX_ATTEMPT_LOG_SIZE = 1000
MAX_REASON_CHARS = 1000
MAX_NAME_CHARS = 256
# bytes of a dead letter's DELIVERY_ATTEMPTS: the newest attempts that fit (the newest always)
MAX_ATTEMPTS_STAMP_BYTES = 4096


@dataclass(frozen=True)
class Attempt:
    delivered_at_ms: int  # 0: not known (no delivery time kept for this subscription)
    ended_at_ms: int
    consumer: str | None
    address: str | None
    ending: str
    reason: str | None = None
    error_class: str | None = None
    fingerprint: str | None = None

    def to_row(self) -> list[Any]:
        row = [self.delivered_at_ms, self.ended_at_ms, self.consumer, self.address, self.ending, self.reason]
        if self.error_class is not None or self.fingerprint is not None:
            row += [self.error_class, self.fingerprint]
        return row

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Attempt:
        delivered, ended, consumer, address, ending, reason = row[:6]
        error_class, fingerprint = (row[6], row[7]) if len(row) >= 8 else (None, None)
        return cls(int(delivered), int(ended), consumer, address, str(ending), reason, error_class, fingerprint)

    def to_json(self) -> dict[str, Any]:
        """The REST and DELIVERY_ATTEMPTS shape (times in ms since the epoch, null when unknown)."""
        return {
            "deliveredAt": self.delivered_at_ms or None,
            "endedAt": self.ended_at_ms or None,
            "consumer": self.consumer,
            "address": self.address,
            "ending": self.ending,
            "reason": self.reason,
            **({"errorClass": self.error_class, "fingerprint": self.fingerprint}
               if self.error_class is not None or self.fingerprint is not None else {}),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Attempt:
        """An attempt from DELIVERY_ATTEMPTS text (which any producer on a dead letter topic
        can write): a field of the wrong type or out of range reads as unknown."""
        return cls(_time_ms(doc.get("deliveredAt")), _time_ms(doc.get("endedAt")), _text(doc.get("consumer")),
                   _text(doc.get("address")), _text(doc.get("ending")) or "", _text(doc.get("reason")),
                   _text(doc.get("errorClass")), _text(doc.get("fingerprint")))


MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: later is not a time


def _time_ms(value: Any) -> int:
    """A time in ms since the epoch, or 0 (unknown) for anything else."""
    if type(value) is int and 0 < value <= MAX_TIME_MS:
        return value
    return 0


def _text(value: Any) -> str | None:
    return value[:MAX_REASON_CHARS] if isinstance(value, str) else None  # (a name: shorter still)


def ending_for(event: Event, announced: str | None = None, announces: bool = False) -> str:
    """How a delivery ended, for the failure `event` that ended it. The wire cannot
    tell a nack from an ack timeout (both ask for redelivery): `announced` is the
    ending a letterbox client announced for this message (None: none), `announces`
    whether the consumer announces its nacks (then an unannounced redelivery was its
    ack timeout); a plain client's redelivery requests are recorded as nacks."""
    if isinstance(event, (Nack, AckTimeout, RedeliverAll)):
        if announced is not None:
            return announced
        if isinstance(event, AckTimeout) or announces:
            return ACK_TIMEOUT
        return NACK
    if isinstance(event, ConsumerGone):
        return CONSUMER_GONE
    if isinstance(event, (Terminate, PipelineFail)):
        return TERMINATED
    if isinstance(event, Expired):
        return EXPIRED
    raise TypeError(f"not an event that ends a delivery: {event!r}")


def clip_name(name: str | None) -> str | None:
    """A consumer name as an attempt keeps it: at most MAX_NAME_CHARS characters."""
    if name is None or len(name) <= MAX_NAME_CHARS:
        return name
    return name[: MAX_NAME_CHARS - 1] + "…"


def clip_reason(reason: str | None) -> str | None:
    """A reason as stored: at most MAX_REASON_CHARS characters, None for empty."""
    if not reason:
        return None
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


def encode_rows(rows: list[list[Any]]) -> str:
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


def decode_rows(text: str) -> list[Attempt]:
    return [Attempt.from_row(r) for r in json.loads(text)]


def append_row(text: str | None, attempt: Attempt, limit: int) -> str:
    """The stored rows `text` with `attempt` added, keeping the last `limit`."""
    rows: list[list[Any]] = json.loads(text) if text else []
    rows.append(attempt.to_row())
    return encode_rows(rows[-limit:])


def attempts_property(attempts: list[Attempt]) -> str:
    """The DELIVERY_ATTEMPTS property of a dead letter: compact JSON (_within_budget)."""
    return _within_budget([json.dumps(a.to_json(), separators=(",", ":"), ensure_ascii=False) for a in attempts])


def _within_budget(objects: list[str]) -> str:
    """The JSON list of the newest of these objects whose text fits MAX_ATTEMPTS_STAMP_BYTES
    (the newest always), so a dead letter's stamps stay within the frame's padding."""
    kept: list[str] = []
    size = 2
    for text in reversed(objects):
        size += len(text.encode()) + 1
        if kept and size > MAX_ATTEMPTS_STAMP_BYTES:
            break
        kept.append(text)
    return "[" + ",".join(reversed(kept)) + "]"


def attempts_property_rows(rows: Sequence[Sequence[Any]]) -> str:
    """attempts_property() of the attempts these stored rows are (Attempt.from_row), the
    same text, without making an Attempt per row (one per dead letter and attempt) and
    without json.dumps's per-call set-up: each object written as json.dumps would."""
    out = []
    for row in rows:
        d, e, c, a, n, r = row[:6]
        d, e = int(d), int(e)
        extra = f',"errorClass":{_json_value(row[6])},"fingerprint":{_json_value(row[7])}' if len(row) >= 8 else ""
        out.append(f'{{"deliveredAt":{d or "null"},"endedAt":{e or "null"},"consumer":{_json_value(c)},'
                   f'"address":{_json_value(a)},"ending":{_json_string(str(n))},"reason":{_json_value(r)}{extra}}}')
    return _within_budget(out)


def _json_value(value: Any) -> str:  # (_json_string: what json.dumps(ensure_ascii=False) uses for a str)
    """json.dumps(value, separators=(",", ":"), ensure_ascii=False)."""
    if value is None:
        return "null"
    if type(value) is str:
        return _json_string(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_attempts_property(value: str | None) -> list[Attempt]:
    """A dead letter's DELIVERY_ATTEMPTS back as attempts ([] when absent or unreadable)."""
    if not value:
        return []
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        return []
    return [Attempt.from_json(d) for d in doc if isinstance(d, dict)] if isinstance(doc, list) else []


def last_error_class(attempts: Sequence[Attempt]) -> str | None:
    """The error class of the latest attempt that has one."""
    return next((a.error_class for a in reversed(attempts) if a.error_class), None)


def last_row_error_class(rows: Sequence[Sequence[Any]]) -> str | None:
    """last_error_class() of stored rows."""
    return next((str(r[6]) for r in reversed(rows) if len(r) >= 8 and r[6]), None)


def last_reason(attempts: list[Attempt]) -> str | None:
    """The reason of the latest attempt that has one."""
    for a in reversed(attempts):
        if a.reason:
            return a.reason
    return None
