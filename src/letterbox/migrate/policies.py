# A namespace's policies on the way to Pulsar: those Pulsar has (retention, message TTL, backlog
# quotas, schema compatibility strategy, the roles' permissions) are set on the target as the
# source has them; those only letterbox has (its broker-side dead-letter and redelivery-backoff
# policies) are reported with what to use on Pulsar instead. Deduplication is switched on: the
# copy relies on it. A topic's schema (its latest version) goes with the topic: copy_schema.
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
}


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
    for kind, quota in (source.get_json(f"{base}/backlogQuotaMap") or {}).items():
        target.request("POST", f"{base}/backlogQuota", quota, query={"backlogQuotaType": kind})
    strategy = source.get_json(f"{base}/schemaCompatibilityStrategy")
    if strategy and strategy != "UNDEFINED":
        target.request("PUT", f"{base}/schemaCompatibilityStrategy", strategy)
    for role, actions in (source.get_json(f"{base}/permissions") or {}).items():
        target.request("POST", f"{base}/permissions/{quote(role, safe='')}", sorted(actions))
    report = []
    for path, instead in LETTERBOX_ONLY.items():
        value: Any = source.get_json(f"{base}/{path}")
        if value:
            report.append(f"{namespace}: {path.split('/')[1]} {value} is letterbox-only, not copied; {instead}")
    return report


def copy_schema(source: Admin, target: TargetAdmin, topic: str) -> None:
    """The latest schema of `topic` (a topic or a partitioned topic's parent) registered on the
    target too; a topic without a schema gets none."""
    path = "/admin/v2/schemas/" + topic.split("://", 1)[1] + "/schema"
    try:
        schema = source.get_json(path)
    except Exception as exc:  # the admin client's error carries the HTTP status
        if getattr(exc, "status", None) == 404:
            return
        raise
    if schema:
        target.request("POST", path, {"type": schema["type"], "schema": schema.get("data", ""),
                                      "properties": schema.get("properties") or {}})
