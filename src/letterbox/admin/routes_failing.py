# What is failing right now in one namespace (letterbox extension; the console's
# landing page asks it once per namespace):
#   GET /admin/v2/namespaces/{t}/{ns}/letterbox/failing
# answers, read-only:
#   deadLetterTopics  each dead letter topic with its live dead letters: count, by
#                     reason and source topic, the most frequent failure descriptions
#                     (FAILURE_DESCRIPTION, else DEAD_LETTER_DESCRIPTION), the
#                     newest DEAD_LETTER_TIME, the counts of the last hour and day
#                     and a trend: TREND_BUCKETS counts of TREND_BUCKET_MS each,
#                     the last one ending at the broker's now;
#   poisonSuspects    each subscription with poison suspects (count, the maximum);
#   parkedKeys        each subscription whose ordered quarantine holds poisoned keys
#                     (count, the first MAX_KEYS with their poisoned message);
#   redriveTasks      the running redrive tasks of the namespace's DLQs, or null
#                     when the caller is not a tenant admin (their own route is
#                     TENANT_ADMIN).
# The rule is CONSUME on the namespace (access_rules.py), as the dead letter
# topic listing; with authorization on, a subscription the caller may not
# consume from is left out of poisonSuspects and parkedKeys.
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.request_parsing import NAMESPACE_BASE, namespace_of
from letterbox.broker import (
    PersistentTopic,
    live_dead_letters_async,
    max_redeliveries,
    suspect_count,
)
from letterbox.failure import TopicRole, topic_role
from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DEAD_LETTER_REASON,
    FAILURE_DESCRIPTION,
    REAL_TOPIC,
)
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

FAILING_PATH = NAMESPACE_BASE + "/letterbox/failing"
TREND_BUCKETS = 12
TREND_BUCKET_MS = 5 * 60_000  # the trend covers the last hour
HOUR_MS, DAY_MS = 3_600_000, 86_400_000
MAX_DESCRIPTIONS = 3
MAX_DESCRIPTION_CHARS = 300
MAX_KEYS = 20


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    router.add_get(FAILING_PATH, FailingRoute(admin).failing)


def description_of(properties: dict[str, str]) -> str | None:
    """The text a client or the broker gave for the failure, if any."""
    return properties.get(FAILURE_DESCRIPTION) or properties.get(DEAD_LETTER_DESCRIPTION) or None


async def dead_letter_topic(topic: PersistentTopic, now_ms: int) -> dict[str, Any] | None:
    """One pass over the live dead letters of `topic`; None when it is not a dead letter topic."""
    is_dlq = topic_role(str(topic.name)) is TopicRole.DEAD_LETTER
    total, newest, last_hour, last_day = 0, 0, 0, 0
    by_reason: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    descriptions: Counter[str] = Counter()
    trend = [0] * TREND_BUCKETS
    start = now_ms - TREND_BUCKETS * TREND_BUCKET_MS
    async for dl in live_dead_letters_async(topic):
        if total == 0 and not is_dlq and DEAD_LETTER_REASON not in dl.properties:
            return None
        total += 1
        by_reason[dl.reason] += 1
        sources[dl.properties.get(REAL_TOPIC, "unknown")] += 1
        text = description_of(dl.properties)
        if text:
            descriptions[text[:MAX_DESCRIPTION_CHARS]] += 1
        at = dl.dead_lettered_at or 0
        newest = max(newest, at)
        last_hour += at > now_ms - HOUR_MS
        last_day += at > now_ms - DAY_MS
        if start < at <= now_ms:
            trend[min((at - start - 1) // TREND_BUCKET_MS, TREND_BUCKETS - 1)] += 1
    if total == 0 and not is_dlq:
        return None
    return {
        "topic": str(topic.name), "messages": total, "byReason": dict(by_reason), "sourceTopics": dict(sources),
        "descriptions": [[text, n] for text, n in descriptions.most_common(MAX_DESCRIPTIONS)],
        "newestDeadLetterTime": newest or None, "lastHour": last_hour, "lastDay": last_day,
        "trend": {"bucketMs": TREND_BUCKET_MS, "endsAt": now_ms, "counts": trend},
    }


class FailingRoute:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    def _topics(self, ns: str) -> list[PersistentTopic]:
        out = []
        for name in self.service.list_topics(ns):
            tn = TopicName.parse(name)
            if tn.persistent and self.service.topic_exists(tn):
                topic = self.service.get_topic(tn, create=False)
                if isinstance(topic, PersistentTopic):
                    out.append(topic)
        return out

    async def failing(self, request: web.Request) -> web.Response:
        ns = namespace_of(request)
        self.admin.require_namespace(ns)
        authz, role = self.service.authorization, request.get("role")
        checked = authz.enabled and not authz.is_super_user(role)
        now = self.service.clock.now_ms()
        dlqs, suspects, parked = [], [], []
        for topic in self._topics(ns):
            found = await dead_letter_topic(topic, now)
            if found is not None:
                dlqs.append(found)
            for sub_name, sub in sorted(topic.subscriptions.items()):
                if not sub.durable or (checked and not authz.can_consume(role, topic.name, sub_name)):
                    continue
                where = {"topic": str(topic.name), "subscription": sub_name}
                count = suspect_count(sub)
                if count:
                    suspects.append({**where, "suspectCount": count, "maxRedeliveries": max_redeliveries(sub)})
                quarantine = getattr(sub, "quarantine", None)
                keys = quarantine.poisoned_keys() if quarantine is not None else {}
                if keys:
                    parked.append({**where, "keys": len(keys), "sample": [
                        {"key": k, "originMessageId": v} for k, v in sorted(keys.items())[:MAX_KEYS]]})
        tasks: list[dict[str, Any]] | None = None
        if not authz.enabled or authz.is_tenant_admin(role, ns.split("/")[0]):
            names = {d["topic"] for d in dlqs}
            tasks = [t.view() for name in sorted(names) for t in self.service.redrive_tasks.of_dlq(
                TopicName.parse(name)) if t.state == "running"]
        return web.json_response({
            "namespace": ns, "now": now, "deadLetterTopics": dlqs, "poisonSuspects": suspects,
            "parkedKeys": parked, "redriveTasks": tasks,
        })
