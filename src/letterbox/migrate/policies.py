# Policies on the way to Pulsar. A namespace's policies that Pulsar has (retention, message TTL,
# backlog quotas, schema compatibility strategy, the roles' permissions, and the limits:
# producers, consumers, unacked messages, dispatch rates, delayed delivery, inactive topics,
# auto topic creation) are set on the target as the source has them; those only letterbox has
# (its broker-side dead-letter, redelivery-backoff and circuit breaker policies) are reported
# with what to use on Pulsar instead. Deduplication is switched on: the copy relies on it.
# A topic takes its own policies and permissions along (copy_topic_policies) and every version
# of its schema, oldest first, so the versions are numbered alike on both (copy_schema).
# Invariant: a policy the source has not set is not written on the target.
from __future__ import annotations

import urllib.parse
from typing import Any

from letterbox.migrate.plan import Admin
from letterbox.migrate.positions import TargetAdmin

quote = urllib.parse.quote

LETTERBOX_ONLY = {
    "letterbox/deadLetterPolicy": "broker-side dead lettering: use the clients' DeadLetterPolicy "
                                  "(Shared and Key_Shared subscriptions only on Pulsar)",
    "letterbox/redeliveryBackoff": "broker-side redelivery backoff: use the clients' negative-ack "
                                   "and ack-timeout RedeliveryBackoff",
    "letterbox/circuitBreaker": "outage detection: Pulsar has no circuit breaker; pause the consumers "
                                "during an outage yourself",
}


# policies at the same admin path and with the same body on both brokers
NAMESPACE_LIMITS = ("maxProducersPerTopic", "maxConsumersPerTopic", "maxUnackedMessagesPerConsumer",
                    "maxUnackedMessagesPerSubscription", "dispatchRate", "subscriptionDispatchRate",
                    "delayedDelivery", "inactiveTopicPolicies", "autoTopicCreation")
TOPIC_POLICIES = ("maxProducers", "maxConsumers", "maxUnackedMessagesOnConsumer", "maxUnackedMessagesOnSubscription",
                  "dispatchRate", "subscriptionDispatchRate", "delayedDelivery", "inactiveTopicPolicies")


def _copy_set(source: Admin, target: TargetAdmin, base: str, names: tuple[str, ...],
              inherited: dict[str, list[str]] | None = None) -> None:
    """Each policy of `names` under `base` that the source has set, set on the target too,
    then the backlog quotas and the roles' permissions under `base`. A topic's permissions
    are answered merged with its namespace's (`inherited`): a role whose actions there are
    the namespace's own is left to the namespace's grant."""
    for name in names:
        value = source.get_json(f"{base}/{name}")
        if value is not None:
            target.request("POST", f"{base}/{name}", value)
    for kind, quota in (source.get_json(f"{base}/backlogQuotaMap") or {}).items():
        target.request("POST", f"{base}/backlogQuota", quota, query={"backlogQuotaType": kind})
    inherited = inherited or {}
    for role, actions in (source.get_json(f"{base}/permissions") or {}).items():
        if role not in inherited or sorted(actions) != sorted(inherited[role]):
            target.request("POST", f"{base}/permissions/{quote(role, safe='')}", sorted(actions))


def copy_policies(source: Admin, target: TargetAdmin, namespace: str) -> list[str]:
    """Set `namespace`'s Pulsar policies on the target; return one line per letterbox-only policy."""
    base = f"/admin/v2/namespaces/{namespace}"
    target.request("POST", f"{base}/deduplication", True)
    retention = source.get_json(f"{base}/retention")
    if retention and (retention.get("retentionTimeInMinutes") or retention.get("retentionSizeInMB")):
        target.request("POST", f"{base}/retention", retention)
    ttl = source.get_json(f"{base}/messageTTL")
    if ttl is not None:
        target.request("POST", f"{base}/messageTTL", ttl)
    strategy = source.get_json(f"{base}/schemaCompatibilityStrategy")
    if strategy and strategy != "UNDEFINED":
        target.request("PUT", f"{base}/schemaCompatibilityStrategy", strategy)
    _copy_set(source, target, base, NAMESPACE_LIMITS)
    report = []
    for path, instead in LETTERBOX_ONLY.items():
        value: Any = source.get_json(f"{base}/{path}")
        if value is not None:  # ({} is a circuit breaker with its defaults)
            report.append(f"{namespace}: {path.split('/')[1]} {value} is letterbox-only, not copied; {instead}")
    return report


def copy_topic_policies(source: Admin, target: TargetAdmin, topic: str) -> None:
    """`topic`'s own policies, backlog quotas and permissions (a topic or a partitioned topic's
    parent) set on the target as on the source."""
    local = topic.split("://", 1)[1]
    inherited = source.get_json("/admin/v2/namespaces/" + local.rsplit("/", 1)[0] + "/permissions") or {}
    _copy_set(source, target, "/admin/v2/persistent/" + local, TOPIC_POLICIES, inherited)


def copy_schema(source: Admin, target: TargetAdmin, topic: str) -> None:
    """Every version of `topic`'s schema (a topic or a partitioned topic's parent) registered
    on the target, oldest first; a topic without a schema gets none. A version the target has
    already (a rerun) is answered with its number and not added again."""
    path = "/admin/v2/schemas/" + topic.split("://", 1)[1]
    try:
        versions = source.get_json(path + "/schemas")
    except Exception as exc:  # the admin client's error carries the HTTP status
        if getattr(exc, "status", None) == 404:
            return
        raise
    for schema in sorted((versions or {}).get("getSchemaResponses") or [], key=lambda v: int(v["version"])):
        target.request("POST", path + "/schema", {"type": schema["type"], "schema": schema.get("data", ""),
                                                  "properties": schema.get("properties") or {}})
