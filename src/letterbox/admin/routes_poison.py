# Poison-message early warning over HTTP (broker/redelivery/poison_suspects.py):
#   GET .../{topic}/subscription/{sub}/letterbox/poison-suspects?limit=N
# the subscription's messages redelivered more than half the times its
# dead-letter policy allows, most redelivered first, with their delivery
# count, the maximum, delivery times on the broker's clock and the last
# failure reason (null where the broker has none). A partitioned topic answers
# for all its partitions (each message id names its partition). `limit`
# (1..10000, default 100) bounds the list, never `suspectCount`. The rule is
# CONSUME on the topic and subscription (admin/access_rules.py).
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, query_int, topic_name
from letterbox.admin.topic_lookup import partition_targets
from letterbox.broker import max_redeliveries, suspect_count, suspects

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

POISON_PATH = TOPIC_BASE + "/subscription/{subscription}/letterbox/poison-suspects"
MAX_LIMIT = 10_000


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    async def poison_suspects(request: web.Request) -> web.Response:
        name = topic_name(request)
        sub_name = request.match_info["subscription"]
        limit = query_int(request, "limit", 100)
        if not 1 <= limit <= MAX_LIMIT:
            raise AdminError(412, f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        subs = []
        for topic in partition_targets(admin, name, "Listing poison suspects"):
            sub = topic.subscriptions.get(sub_name)
            if sub is not None and sub.durable:
                subs.append(sub)
        if not subs:
            raise AdminError(404, f"Subscription {sub_name} not found on topic {name}")
        found = sorted((s for sub in subs for s in suspects(sub, limit)),
                       key=lambda s: (-s.redelivery_count, s.message_id))[:limit]
        total = sum(suspect_count(sub) for sub in subs)
        return web.json_response({
            "topic": str(name), "subscription": sub_name,
            "maxRedeliveries": max_redeliveries(subs[0]), "suspectCount": total,
            "truncated": total > len(found), "suspects": [s.as_json() for s in found],
        })

    router.add_get(POISON_PATH, poison_suspects)
