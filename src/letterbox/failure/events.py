# Failure events: what a namespace's failure events topic carries, and its policy.
# A namespace that opts in (FailureEventsPolicy.enabled) gets the system topic
#     persistent://<tenant>/<namespace>/__letterbox_failure_events
# and one small JSON event per failure transition of any topic of the namespace:
#     {"type", "time" (ms, the broker's clock), "topic", "subscription", "messageId",
#      "reason", ...what matters for the type}
# types: nack (a nack with a reason, "consumer"), dead-letter ("deadLetterTopic",
# "deadLetterMessageId" once known, "deliveryCount"), terminate, park ("parkedBehind"),
# redrive ("deadLetterTopic", "target", "messageId" of the new message), edit (as redrive, and
# "by", "oldPayloadSha256"), circuit (a subscription's circuit breaker changed: "state").
# Pure: no I/O. Invariants: an event is compact UTF-8 JSON of at most MAX_EVENT_BYTES (a long
# reason is clipped to MAX_REASON_CHARS); the events topic is never itself a source of events
# (is_failure_events_topic), nor subject to dead-letter, TTL or backlog policies (the broker
# checks is_failure_events_topic); its retention is the policy's own.
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from letterbox.failure.errors import PolicyError

FAILURE_EVENTS_TOPIC = "__letterbox_failure_events"
NACK, DEAD_LETTER, TERMINATE, PARK, REDRIVE, EDIT, CIRCUIT = (
    "nack", "dead-letter", "terminate", "park", "redrive", "edit", "circuit")
EVENT_TYPES = (NACK, DEAD_LETTER, TERMINATE, PARK, REDRIVE, EDIT, CIRCUIT)
MAX_REASON_CHARS = 500
MAX_EVENT_BYTES = 4096
DEFAULT_RETENTION_MINUTES = 7 * 24 * 60
DEFAULT_RETENTION_MB = 100
POLICY_FIELDS = ("enabled", "retentionTimeInMinutes", "retentionSizeInMB")
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def events_topic_name(namespace: str) -> str:
    """The failure events topic of `namespace` (tenant/namespace)."""
    return f"persistent://{namespace}/{FAILURE_EVENTS_TOPIC}"


def is_failure_events_topic(topic: str) -> bool:
    """Whether `topic` (a full name, or its local part) is a failure events topic."""
    return topic.rsplit("/", 1)[-1].split("-partition-")[0] == FAILURE_EVENTS_TOPIC


@dataclass(frozen=True)
class FailureEventsPolicy:
    enabled: bool = False
    retention_minutes: int = DEFAULT_RETENTION_MINUTES  # -1: keep forever
    retention_size_mb: int = DEFAULT_RETENTION_MB  # -1: no size limit

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "retentionTimeInMinutes": self.retention_minutes,
                "retentionSizeInMB": self.retention_size_mb}

    @classmethod
    def from_json(cls, doc: Any) -> FailureEventsPolicy:
        """The policy from its JSON form; PolicyError naming the field that is wrong."""
        if not isinstance(doc, dict):
            raise PolicyError(f"failureEvents must be a JSON object with {list(POLICY_FIELDS)}")
        unknown = sorted(set(doc) - set(POLICY_FIELDS))
        if unknown:
            raise PolicyError(f"failureEvents: unknown field(s) {unknown}; known: {list(POLICY_FIELDS)}")
        enabled = doc.get("enabled", True)
        if not isinstance(enabled, bool):
            raise PolicyError(f"failureEvents.enabled must be true or false, got {enabled!r}")
        values = []
        for key, default in (("retentionTimeInMinutes", DEFAULT_RETENTION_MINUTES),
                             ("retentionSizeInMB", DEFAULT_RETENTION_MB)):
            value = doc.get(key, default)
            if type(value) is not int or not (value == -1 or 1 <= value <= 2**31 - 1):
                raise PolicyError(f"failureEvents.{key} must be -1 (no limit) or a positive whole number, "
                                  f"got {value!r}")
            values.append(value)
        return cls(enabled, values[0], values[1])

    @property
    def retention_ms(self) -> int:
        return -1 if self.retention_minutes < 0 else self.retention_minutes * 60_000

    @property
    def retention_bytes(self) -> int:
        return -1 if self.retention_size_mb < 0 else self.retention_size_mb * 1024 * 1024


def failure_event(kind: str, *, time_ms: int, topic: str, subscription: str | None, message_id: str | None,
                  reason: str | None = None, **details: Any) -> dict[str, Any]:
    """One event (details with a None value are left out)."""
    if kind not in EVENT_TYPES:
        raise ValueError(f"unknown failure event type {kind!r}")
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        reason = reason[:MAX_REASON_CHARS] + "…"
    out: dict[str, Any] = {"type": kind, "time": time_ms, "topic": topic, "subscription": subscription,
                           "messageId": message_id, "reason": reason}
    out.update({k: v for k, v in details.items() if v is not None})
    return out


def encode_event(event: dict[str, Any]) -> bytes:
    """An event as the topic carries it (details dropped if it would exceed MAX_EVENT_BYTES)."""
    data = _compact(event).encode()
    if len(data) <= MAX_EVENT_BYTES:
        return data
    core = {k: event.get(k) for k in ("type", "time", "topic", "subscription", "messageId")}
    core["reason"] = (event.get("reason") or "")[:200] or None
    core["truncated"] = True
    return _compact(core).encode()
