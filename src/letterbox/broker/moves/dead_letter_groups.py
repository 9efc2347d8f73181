# Summaries of a dead letter topic (letterbox extension): counts by reason and source topic
# (summary, summary_async: the namespace's dead letter topics listing), and failure groups.
# Failure groups: its live dead letters
# (dead_letters.live_dead_letters_async: not redriven, not purged) counted by their
# failure group (failure.fingerprint), in ONE scan of the topic that keeps per group
# only its counts, its first and last dead-letter time, one example and a count per
# minute; the per-minute counts are folded at the end into at most MAX_BUCKETS bars of
# one common width (a minute, an hour or a day), the same for every group, so a chart
# draws them side by side.
# A dead letter's time is its DEAD_LETTER_TIME, else its publish time.
# Memory: O(groups x minutes with dead letters), never the messages themselves.
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.broker.moves.dead_letters import (
    DeadLetterFilter,
    live_dead_letters,
    live_dead_letters_async,
)
from letterbox.failure import TopicRole, failure_group, topic_role
from letterbox.failure.fingerprint import error_text
from letterbox.message_properties import DEAD_LETTER_REASON, FAILURE_ERROR_CLASS, REAL_TOPIC

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic

MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
MAX_BUCKETS = 60
EXAMPLE_CHARS = 500


@dataclass
class _Group:
    reason: str
    error_class: str
    pattern: str
    example_id: str
    example_text: str
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0
    per_minute: dict[int, int] = field(default_factory=dict)


def bucket_width(span_ms: int) -> int:
    """The finest of a minute, an hour or a day that cuts `span_ms` into at most MAX_BUCKETS."""
    for size in (MINUTE_MS, HOUR_MS):
        if span_ms // size < MAX_BUCKETS:
            return size
    return DAY_MS


async def failure_groups(topic: MovedTopic, flt: DeadLetterFilter | None = None) -> dict[str, Any]:
    """The topic's live dead letters (those `flt` matches) by failure group, largest first:
    {"topic", "messages", "groups": [...], "histogram": {"start", "bucketMs", "buckets"}};
    each group's "histogram" is its count per bucket of that common axis."""
    groups: dict[str, _Group] = {}
    by_text: dict[tuple[str | None, str | None, str], str] = {}  # a repeated text is fingerprinted once
    total = 0
    async for dl in live_dead_letters_async(topic):
        if flt is not None and not flt.matches(dl):
            continue
        total += 1
        props = dl.properties
        text = error_text(props)
        memo = (props.get(DEAD_LETTER_REASON), props.get(FAILURE_ERROR_CLASS), text)
        fp = by_text.get(memo)
        if fp is None:
            g = failure_group(props)
            fp = by_text[memo] = g.fingerprint
            if fp not in groups:
                groups[fp] = _Group(g.reason, g.error_class, g.pattern, dl.message_id, text[:EXAMPLE_CHARS])
            if len(by_text) > 100_000:
                by_text.clear()  # texts that all differ: keep memory bounded
        group = groups[fp]
        at = dl.dead_lettered_at or dl.publish_time
        group.count += 1
        group.first_ms = at if group.count == 1 else min(group.first_ms, at)
        group.last_ms = max(group.last_ms, at)
        minute = at // MINUTE_MS
        group.per_minute[minute] = group.per_minute.get(minute, 0) + 1
    return _answer(str(topic.name), total, groups)


def _answer(topic: str, total: int, groups: dict[str, _Group]) -> dict[str, Any]:
    if not groups:
        return {"topic": topic, "messages": 0, "groups": [],
                "histogram": {"start": None, "bucketMs": MINUTE_MS, "buckets": 0}}
    first = min(g.first_ms for g in groups.values())
    last = max(g.last_ms for g in groups.values())
    width = bucket_width(last - first)
    start = first - first % width
    buckets = (last - start) // width + 1
    out = []
    for fp, g in sorted(groups.items(), key=lambda kv: (-kv[1].count, kv[0])):
        bars = [0] * buckets
        for minute, n in g.per_minute.items():
            bars[(minute * MINUTE_MS - start) // width if minute * MINUTE_MS >= start else 0] += n
        out.append({
            "fingerprint": fp, "reason": g.reason, "errorClass": g.error_class or None, "pattern": g.pattern,
            "count": g.count, "firstDeadLetteredAt": g.first_ms, "lastDeadLetteredAt": g.last_ms,
            "example": {"messageId": g.example_id, "text": g.example_text}, "histogram": bars,
        })
    return {"topic": topic, "messages": total, "groups": out,
            "histogram": {"start": start, "bucketMs": width, "buckets": buckets}}


def summary(topic: MovedTopic) -> dict[str, object]:
    by_reason: dict[str, int] = {}
    sources: dict[str, int] = {}
    total = 0
    for dl in live_dead_letters(topic):
        total += 1
        by_reason[dl.reason] = by_reason.get(dl.reason, 0) + 1
        source = dl.properties.get(REAL_TOPIC, "unknown")
        sources[source] = sources.get(source, 0) + 1
    return {"topic": str(topic.name), "messages": total, "byReason": by_reason, "sourceTopics": sources}


async def summary_async(topic: MovedTopic) -> dict[str, object] | None:
    """summary() of a dead letter topic for the admin view (large entries opened off the
    event loop); None when the topic is not a dead letter topic."""
    by_reason: dict[str, int] = {}
    sources: dict[str, int] = {}
    total = 0
    async for dl in live_dead_letters_async(topic):
        if total == 0 and topic_role(str(topic.name)) is not TopicRole.DEAD_LETTER \
                and DEAD_LETTER_REASON not in dl.properties:
            return None
        total += 1
        by_reason[dl.reason] = by_reason.get(dl.reason, 0) + 1
        source = dl.properties.get(REAL_TOPIC, "unknown")
        sources[source] = sources.get(source, 0) + 1
    if total == 0 and topic_role(str(topic.name)) is not TopicRole.DEAD_LETTER:
        return None
    return {"topic": str(topic.name), "messages": total, "byReason": by_reason, "sourceTopics": sources}
