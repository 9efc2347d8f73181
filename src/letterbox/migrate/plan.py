# What a migration moves, read from the source broker's admin API before anything is written:
# the tenants and namespaces, each topic (a partitioned topic as its partitions) and where each
# of its durable subscriptions stands. A plan is plain frozen data: `letterbox migrate --dry-run`
# prints it, and the copy and the positioning steps take it as their only instructions.
# Invariant: a subscription's position is the cursor as the source's internal stats give it
# (Pulsar's format): everything up to `mark_delete` is acknowledged, and after it exactly the
# entries in `acked` and, of a partly acknowledged batch entry, the indexes in `batch_acked`.
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class Admin(Protocol):
    """An admin REST client (letterbox.cli.http.AdminClient fits)."""

    def get_json(self, path: str, query: dict[str, str] | None = None) -> Any: ...


# a cursor's partly acknowledged batch entries in letterbox's internal stats (admin.stats.BATCH_ACKED)
BATCH_ACKED = "letterboxBatchAckedIndexes"


@dataclass(frozen=True)
class SubscriptionPosition:
    name: str
    mark_delete: int  # entry id; -1: nothing acknowledged yet
    acked: frozenset[int] = frozenset()  # entries acknowledged after mark_delete
    # partly acknowledged batch entries -> the batch indexes acknowledged in them
    batch_acked: Mapping[int, frozenset[int]] = field(default_factory=dict)

    def is_acked(self, entry_id: int, batch_index: int = -1) -> bool:
        if entry_id <= self.mark_delete or entry_id in self.acked:
            return True
        done = self.batch_acked.get(entry_id)
        return done is not None and batch_index in done


@dataclass(frozen=True)
class TopicPlan:
    name: str  # persistent://tenant/namespace/topic, a partition's own name for a partition
    entries: int
    subscriptions: tuple[SubscriptionPosition, ...] = ()


@dataclass(frozen=True)
class NamespacePlan:
    name: str  # tenant/namespace
    partitioned: dict[str, int] = field(default_factory=dict)  # parent topic -> partitions
    topics: tuple[TopicPlan, ...] = ()


@dataclass(frozen=True)
class MigrationPlan:
    tenants: tuple[str, ...]
    namespaces: tuple[NamespacePlan, ...]

    @property
    def topics(self) -> list[TopicPlan]:
        return [t for ns in self.namespaces for t in ns.topics]

    def describe(self) -> list[str]:
        """The plan as lines a person reads (`--dry-run`)."""
        lines = [f"tenant {t}" for t in self.tenants]
        for ns in self.namespaces:
            lines.append(f"namespace {ns.name}")
            for parent, n in sorted(ns.partitioned.items()):
                lines.append(f"  partitioned topic {parent} ({n} partitions)")
            for t in ns.topics:
                subs = ", ".join(f"{s.name} (acked through {s.mark_delete}, {len(s.acked)} more)"
                                 for s in t.subscriptions) or "no subscription"
                lines.append(f"  topic {t.name}: {t.entries} entries; {subs}")
        return lines


_RANGE = re.compile(r"\((\d+):(-?\d+)\.\.(\d+):(-?\d+)\]")
SKIPPED_TENANTS = frozenset({"pulsar"})  # the broker's own system tenant


def acked_entries(ranges: str) -> frozenset[int]:
    """Pulsar's individuallyDeletedMessages, "[(l:a..l:b], ...]": entries a+1 .. b each."""
    out: set[int] = set()
    for m in _RANGE.finditer(ranges):
        out.update(range(int(m.group(2)) + 1, int(m.group(4)) + 1))
    return frozenset(out)


def batch_acked(cursor: dict[str, Any]) -> dict[tuple[int, int], frozenset[int]]:
    """(ledger, entry) -> acknowledged batch indexes, of a cursor's partly acknowledged batches."""
    out = {}
    for position, indexes in (cursor.get(BATCH_ACKED) or {}).items():
        ledger, entry = (int(x) for x in position.split(":"))
        out[(ledger, entry)] = frozenset(int(i) for i in indexes)
    return out


def acked_through(cursor: dict[str, Any]) -> Callable[[int, int, int], bool]:
    """Whether a (ledger, entry, batch index) is acknowledged by a cursor of Pulsar's internal
    stats (ledger ids included: a Pulsar topic spans several ledgers), letterbox's batch-index
    acknowledgements included."""
    md = tuple(int(x) for x in cursor["markDeletePosition"].split(":"))
    ranges = [((int(m.group(1)), int(m.group(2))), (int(m.group(3)), int(m.group(4))))
              for m in _RANGE.finditer(cursor.get("individuallyDeletedMessages", "[]"))]
    batches = batch_acked(cursor)

    def acked(ledger: int, entry: int, batch_index: int = -1) -> bool:
        at = (ledger, entry)
        if at <= md or any(lo < at <= hi for lo, hi in ranges):
            return True
        done = batches.get(at)
        return done is not None and batch_index in done

    return acked


def entry_of(position: str) -> int:
    """The entry id of a "ledger:entry" position."""
    return int(position.rsplit(":", 1)[1])


def _path(topic: str) -> str:
    return topic.replace("persistent://", "persistent/", 1)


def topic_plan(admin: Admin, topic: str) -> TopicPlan:
    stats = admin.get_json(f"/admin/v2/{_path(topic)}/internalStats")
    subs = []
    for name, cursor in sorted((stats.get("cursors") or {}).items()):
        subs.append(SubscriptionPosition(name, entry_of(cursor["markDeletePosition"]),
                                         acked_entries(cursor.get("individuallyDeletedMessages", "[]")),
                                         {entry: done for (_l, entry), done in batch_acked(cursor).items()}))
    return TopicPlan(topic, int(stats.get("numberOfEntries", 0)), tuple(subs))


def read_plan(admin: Admin, tenants: list[str] | None = None) -> MigrationPlan:
    """Everything the source holds (or the named tenants' part of it)."""
    names = [t for t in admin.get_json("/admin/v2/tenants") if t not in SKIPPED_TENANTS]
    if tenants:
        missing = sorted(set(tenants) - set(names))
        if missing:
            raise ValueError(f"the source has no tenant {', '.join(missing)}")
        names = [t for t in names if t in tenants]
    namespaces = []
    for tenant in names:
        for ns in admin.get_json(f"/admin/v2/namespaces/{tenant}"):
            parents = admin.get_json(f"/admin/v2/persistent/{ns}/partitioned")
            partitioned = {p: int(admin.get_json(f"/admin/v2/{_path(p)}/partitions")["partitions"]) for p in parents}
            topics = [t for t in admin.get_json(f"/admin/v2/persistent/{ns}") if "/__" not in t]
            namespaces.append(NamespacePlan(ns, partitioned, tuple(topic_plan(admin, t) for t in sorted(topics))))
    return MigrationPlan(tuple(names), tuple(namespaces))
