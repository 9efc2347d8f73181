# letterbox migrate: a letterbox broker's tenants, namespaces, topics with their retained
# messages, and every durable subscription's position, onto an Apache Pulsar cluster. The face
# of the package: read_plan (what would move: `--dry-run`), migrate (do it; safe to rerun after
# any interruption) and verify (compare both sides).
# Steps, each idempotent: the target's tenants and namespaces (deduplication switched on, the
# retention copied) -> its topics (partitioned with their partition count) -> each topic's
# messages (copy.py) -> each subscription's position (positions.py).
# Invariant: nothing is written on the source.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from letterbox.migrate.copy import (
    MIGRATED_MESSAGE_ID,
    MIGRATED_PUBLISH_TIME,
    SEND_TIMEOUT_MS,
    Copied,
    CopyInterrupted,
    Survey,
    copy_topic,
    survey,
)
from letterbox.migrate.plan import (
    MigrationPlan,
    SubscriptionPosition,
    TopicPlan,
    acked_through,
    read_plan,
)
from letterbox.migrate.policies import copy_policies, copy_schema, copy_topic_policies
from letterbox.migrate.positions import TargetAdmin, place

__all__ = [
    "MIGRATED_MESSAGE_ID",
    "MIGRATED_PUBLISH_TIME",
    "SEND_TIMEOUT_MS",
    "Copied",
    "CopyInterrupted",
    "MigrationPlan",
    "Mismatch",
    "SubscriptionPosition",
    "TopicPlan",
    "migrate",
    "read_plan",
    "verify",
]


@dataclass(frozen=True)
class Mismatch:
    what: str  # "topic" or "subscription"
    name: str
    source: object
    target: object


def _path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("persistent://", "persistent/", 1)


def prepare_target(plan: MigrationPlan, source: Any, target: TargetAdmin) -> list[str]:
    """Tenants, namespaces with their policies (policies.py) and topics on the target; returns
    the report of what letterbox-only policies become."""
    report: list[str] = []
    clusters = target.get_json("/admin/v2/clusters")
    have_tenants = set(target.get_json("/admin/v2/tenants"))
    for tenant in plan.tenants:
        if tenant not in have_tenants:
            target.request("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": clusters})
    for ns in plan.namespaces:
        tenant = ns.name.split("/")[0]
        if ns.name not in set(target.get_json(f"/admin/v2/namespaces/{tenant}")):
            target.request("PUT", f"/admin/v2/namespaces/{ns.name}")
        report.extend(copy_policies(source, target, ns.name))
        have_parts = set(target.get_json(f"/admin/v2/persistent/{ns.name}/partitioned"))
        for parent, n in ns.partitioned.items():
            if parent not in have_parts:
                target.request("PUT", f"{_path(parent)}/partitions", n)
        have = set(target.get_json(f"/admin/v2/persistent/{ns.name}"))
        for t in ns.topics:
            if t.name not in have and "-partition-" not in t.name:
                target.request("PUT", _path(t.name))
        for name in [*ns.partitioned, *(t.name for t in ns.topics if "-partition-" not in t.name)]:
            copy_schema(source, target, name)
            copy_topic_policies(source, target, name)
    return report


def migrate(plan: MigrationPlan, source_admin: Any, target_admin: TargetAdmin, source: Any, target: Any,
            progress: Callable[[str, int, int], None] | None = None,
            report: Callable[[str], None] | None = None, send_timeout_ms: int = SEND_TIMEOUT_MS) -> list[Copied]:
    """Carry out `plan`: `source`/`target` are official `pulsar.Client`s of the two brokers.
    `progress(topic, sent, total)` is told as each topic's copy goes on; `report(line)` what
    becomes of each letterbox-only policy. A target that stops answering for `send_timeout_ms`
    ends the copy with CopyInterrupted (or the client's own error, or the admin client's)."""
    for line in prepare_target(plan, source_admin, target_admin):
        if report is not None:
            report(line)
    done = []
    for t in plan.topics:
        def told(sent: int, t: TopicPlan = t) -> None:
            if progress is not None:
                progress(t.name, sent, t.entries)

        told(0)
        done.append(copy_topic(source, target, t.name, told, send_timeout_ms))
        place(target_admin, target, t)
    return done


def unacked(seen: Survey, cursors: dict[str, Any], subscription: str) -> set[str]:
    """The messages `subscription` has not acknowledged, by their source ids (MIGRATED_MESSAGE_ID
    on the target), from its cursor in the broker's internal stats: no message is consumed."""
    cursor = cursors.get(subscription)
    if cursor is None:
        return {"(no such subscription)"}
    acked = acked_through(cursor)
    return {origin for ledger, entry, batch, origin in seen.ids if not acked(ledger, entry, batch)}


def verify(plan: MigrationPlan, source_admin: Any, target_admin: TargetAdmin, source: Any,
           target: Any) -> list[Mismatch]:
    """Each topic's messages (count and checksum) and each subscription's unacknowledged messages
    on both sides: one read of each topic and one look at its cursors per side."""
    out = []
    for t in plan.topics:
        a, b = survey(source, t.name), survey(target, t.name)
        if (a.count, a.digest) != (b.count, b.digest):
            out.append(Mismatch("topic", t.name, (a.count, a.digest), (b.count, b.digest)))
        if not t.subscriptions:
            continue
        src = source_admin.get_json(f"{_path(t.name)}/internalStats")["cursors"]
        dst = target_admin.get_json(f"{_path(t.name)}/internalStats")["cursors"]
        for s in t.subscriptions:
            want, got = unacked(a, src, s.name), unacked(b, dst, s.name)
            if want != got:
                out.append(Mismatch("subscription", f"{t.name} {s.name}", sorted(want), sorted(got)))
    return out
