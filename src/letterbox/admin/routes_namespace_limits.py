# Namespace policies that bound topics, at Pulsar's admin v2 paths (GET/POST/
# DELETE each): backlogQuota (POST/DELETE .../backlogQuota[?backlogQuotaType=
# destination_storage|message_age], GET .../backlogQuotaMap), maxProducersPerTopic,
# maxConsumersPerTopic, maxUnackedMessagesPerConsumer,
# maxUnackedMessagesPerSubscription (body: an integer >= 0, 0 = no limit),
# dispatchRate and subscriptionDispatchRate ({"dispatchThrottlingRateInMsg",
# "dispatchThrottlingRateInByte", "ratePeriodInSecond"}), delayedDelivery ({"active", "tickTime"}) and autoTopicCreation
# ({"allowAutoTopicCreation", "topicType", "defaultNumPartitions"}). Bodies are
# validated completely before anything is stored (400 malformed or unknown
# field, 412 out of range). What they do is broker/policies/topic_policies.py's and
# broker/topics/backlog_quota.py's.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import NAMESPACE_BASE, json_body
from letterbox.admin.routes_namespace_policies import MAX_INT32, PolicyRoutes, _object
from letterbox.broker import SUBSCRIPTION_RATE, TOPIC_RATE, inactive_topics
from letterbox.broker import topic_policies as tp

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

MAX_INT64 = 2**63 - 1
QUOTA_TYPES = (tp.DESTINATION_STORAGE, tp.MESSAGE_AGE)


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = PolicyRoutes(admin)
    for path, key in (("/maxProducersPerTopic", tp.MAX_PRODUCERS), ("/maxConsumersPerTopic", tp.MAX_CONSUMERS),
                      ("/maxUnackedMessagesPerConsumer", tp.MAX_UNACKED_CONSUMER),
                      ("/maxUnackedMessagesPerSubscription", tp.MAX_UNACKED_SUBSCRIPTION)):
        router.add_get(NAMESPACE_BASE + path, routes.getter(key))
        router.add_post(NAMESPACE_BASE + path, routes.setter(key, _count(path[1:])))
        router.add_delete(NAMESPACE_BASE + path, routes.remover(key))
    for path, key, validate in (("/dispatchRate", TOPIC_RATE, _dispatch_rate),
                                ("/subscriptionDispatchRate", SUBSCRIPTION_RATE, _dispatch_rate),
                                ("/delayedDelivery", tp.DELAYED_DELIVERY, _delayed_delivery),
                                ("/inactiveTopicPolicies", inactive_topics.POLICY_KEY, _inactive_topics),
                                ("/autoTopicCreation", tp.AUTO_TOPIC_CREATION, _auto_topic_creation)):
        router.add_get(NAMESPACE_BASE + path, routes.getter(key))
        router.add_post(NAMESPACE_BASE + path, routes.setter(key, validate))
        router.add_delete(NAMESPACE_BASE + path, routes.remover(key))
    quotas = BacklogQuotaRoutes(routes)
    router.add_get(NAMESPACE_BASE + "/backlogQuotaMap", quotas.get_map)
    router.add_post(NAMESPACE_BASE + "/backlogQuota", quotas.set_quota)
    router.add_delete(NAMESPACE_BASE + "/backlogQuota", quotas.remove_quota)


def _count(what: str) -> Any:
    def validate(body: Any) -> int:
        if isinstance(body, bool) or not isinstance(body, int):
            raise AdminError(400, f"Body must be {what} as an integer, got {body!r}")
        if not 0 <= body <= MAX_INT32:
            raise AdminError(412, f"{what} must be between 0 (no limit) and {MAX_INT32}, got {body}")
        return body

    return validate


def _dispatch_rate(body: Any) -> dict[str, Any]:
    obj = _object(body, "Dispatch rate", ("dispatchThrottlingRateInMsg", "dispatchThrottlingRateInByte",
                                          "ratePeriodInSecond", "relativeToPublishRate"))
    out: dict[str, Any] = {}
    for key, default, low in (("dispatchThrottlingRateInMsg", -1, -1), ("dispatchThrottlingRateInByte", -1, -1),
                              ("ratePeriodInSecond", 1, 1)):
        value = obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise AdminError(400, f"{key} must be an integer, got {value!r}")
        if not low <= value <= MAX_INT64:
            raise AdminError(412, f"{key} must be at least {low}, got {value}")
        out[key] = value
    if obj.get("relativeToPublishRate", False) is not False:
        raise AdminError(412, "relativeToPublishRate is not supported by letterbox: give absolute rates")
    out["relativeToPublishRate"] = False
    return out


def _inactive_topics(body: Any) -> dict[str, Any]:
    obj = _object(body, "Inactive topic policies", ("inactiveTopicDeleteMode", "maxInactiveDurationSeconds",
                                                    "deleteWhileInactive"))
    mode = obj.get("inactiveTopicDeleteMode", inactive_topics.MODES[0])
    if mode not in inactive_topics.MODES:
        raise AdminError(400, f"inactiveTopicDeleteMode must be one of {', '.join(inactive_topics.MODES)}, "
                              f"got {mode!r}")
    seconds = obj.get("maxInactiveDurationSeconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise AdminError(400, f"maxInactiveDurationSeconds must be an integer, got {seconds!r}")
    if not 0 <= seconds <= MAX_INT32:
        raise AdminError(412, f"maxInactiveDurationSeconds must be between 0 and {MAX_INT32}, got {seconds}")
    delete = obj.get("deleteWhileInactive", True)
    if not isinstance(delete, bool):
        raise AdminError(400, f"deleteWhileInactive must be true or false, got {delete!r}")
    return {"inactiveTopicDeleteMode": mode, "maxInactiveDurationSeconds": seconds, "deleteWhileInactive": delete}


def _delayed_delivery(body: Any) -> dict[str, Any]:
    obj = _object(body, "Delayed delivery policies", ("active", "tickTime", "maxDeliveryDelayInMillis"))
    active = obj.get("active")
    if not isinstance(active, bool):
        raise AdminError(400, f"active must be true or false, got {active!r}")
    tick = obj.get("tickTime", 1000)
    if isinstance(tick, bool) or not isinstance(tick, int) or not 1 <= tick <= MAX_INT64:
        raise AdminError(412, f"tickTime must be a positive number of milliseconds, got {tick!r}")
    return {"active": active, "tickTime": tick}


def _auto_topic_creation(body: Any) -> dict[str, Any]:
    obj = _object(body, "Auto topic creation override", ("allowAutoTopicCreation", "topicType",
                                                         "defaultNumPartitions"))
    allow = obj.get("allowAutoTopicCreation")
    if not isinstance(allow, bool):
        raise AdminError(400, f"allowAutoTopicCreation must be true or false, got {allow!r}")
    kind = obj.get("topicType", "non-partitioned")
    if kind not in ("non-partitioned", "partitioned"):
        raise AdminError(412, f"topicType must be non-partitioned or partitioned, got {kind!r}")
    out: dict[str, Any] = {"allowAutoTopicCreation": allow, "topicType": kind}
    if kind == "partitioned":
        n = obj.get("defaultNumPartitions")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise AdminError(412, f"defaultNumPartitions must be a positive integer for partitioned, got {n!r}")
        out["defaultNumPartitions"] = n
    return out


def backlog_quota_body(body: Any, kind: str) -> dict[str, Any]:
    obj = _object(body, "Backlog quota", ("limit", "limitSize", "limitTime", "policy"))
    policy = obj.get("policy")
    if policy not in tp.QUOTA_POLICIES:
        raise AdminError(400, f"policy must be one of {', '.join(tp.QUOTA_POLICIES)}, got {policy!r}")
    size = obj.get("limitSize", obj.get("limit", -1))
    age = obj.get("limitTime", -1)
    for name, value, top in (("limitSize", size, MAX_INT64), ("limitTime", age, MAX_INT32)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise AdminError(400, f"{name} must be an integer, got {value!r}")
        if not -1 <= value <= top:
            raise AdminError(412, f"{name} must be between -1 (no limit) and {top}, got {value}")
    if kind == tp.DESTINATION_STORAGE and size < 0:
        raise AdminError(412, "a destination_storage quota needs limitSize (bytes) >= 0")
    if kind == tp.MESSAGE_AGE and age < 0:
        raise AdminError(412, "a message_age quota needs limitTime (seconds) >= 0")
    return {"limitSize": size, "limitTime": age, "policy": policy}


def quota_kind(request: web.Request) -> str:
    """The backlogQuotaType a quota request names (destination_storage when it names none); 400 otherwise."""
    kind = request.query.get("backlogQuotaType", tp.DESTINATION_STORAGE)
    if kind not in QUOTA_TYPES:
        raise AdminError(400, f"backlogQuotaType must be one of {', '.join(QUOTA_TYPES)}, got {kind!r}")
    return kind


async def quota_request(request: web.Request) -> tuple[str, dict[str, Any]]:
    """The kind and the checked quota of a set-backlog-quota request (namespace or topic level)."""
    kind = quota_kind(request)
    body = await json_body(request)
    if body is None:
        raise AdminError(400, "Request body is required: {\"limitSize\", \"limitTime\", \"policy\"}")
    return kind, backlog_quota_body(body, kind)


class BacklogQuotaRoutes:
    def __init__(self, routes: PolicyRoutes) -> None:
        self.routes = routes

    async def get_map(self, request: web.Request) -> web.Response:
        _, doc = self.routes._document(request)
        return web.json_response(doc.get(tp.BACKLOG_QUOTA) or {})

    async def set_quota(self, request: web.Request) -> web.Response:
        kind, quota = await quota_request(request)
        ns, doc = self.routes._document(request)
        quotas = dict(doc.get(tp.BACKLOG_QUOTA) or {})
        quotas[kind] = quota
        await self.routes.policies.update(ns, tp.BACKLOG_QUOTA, quotas)
        return no_content()

    async def remove_quota(self, request: web.Request) -> web.Response:
        kind = quota_kind(request)
        ns, doc = self.routes._document(request)
        quotas = dict(doc.get(tp.BACKLOG_QUOTA) or {})
        quotas.pop(kind, None)
        await self.routes.policies.update(ns, tp.BACKLOG_QUOTA, quotas or None)
        return no_content()


# the validators, by name, for the topic-level policies (routes_topic_policies.py)
VALIDATORS: dict[str, Any] = {
    "count": lambda body, what: _count(what)(body),
    "delayedDelivery": lambda body, _what: _delayed_delivery(body),
    "dispatchRate": lambda body, _what: _dispatch_rate(body),
    "inactiveTopicPolicies": lambda body, _what: _inactive_topics(body),
}
