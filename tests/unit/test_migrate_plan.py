"""A migration plan's reading of Pulsar-format cursor positions (letterbox.migrate.plan), pure."""
from __future__ import annotations

from letterbox.migrate.plan import (
    MigrationPlan,
    NamespacePlan,
    SubscriptionPosition,
    TopicPlan,
    acked_entries,
    acked_through,
)


def test_individually_deleted_ranges_are_open_below_and_closed_above() -> None:
    assert acked_entries("[]") == frozenset()
    assert acked_entries("[(7:4..7:6], (7:9..7:10]]") == {5, 6, 10}


def test_a_position_knows_what_it_acknowledged() -> None:
    pos = SubscriptionPosition("s", 3, frozenset({5, 6}))
    assert [e for e in range(8) if pos.is_acked(e)] == [0, 1, 2, 3, 5, 6]


def test_acked_through_compares_ledger_then_entry() -> None:
    acked = acked_through({"markDeletePosition": "5:9", "individuallyDeletedMessages": "[(6:1..6:3], (8:0..9:2]]"})
    assert acked(4, 100) and acked(5, 9) and not acked(5, 10)
    assert [e for e in range(5) if acked(6, e)] == [2, 3]
    assert acked(8, 7) and acked(9, 0) and acked(9, 2) and not acked(9, 3) and not acked(8, 0)


def test_describe_names_everything_that_would_move() -> None:
    plan = MigrationPlan(("t",), (NamespacePlan("t/ns", {"persistent://t/ns/p": 2}, (
        TopicPlan("persistent://t/ns/a", 10, (SubscriptionPosition("s", 4, frozenset({6})),)),)),))
    assert plan.describe() == [
        "tenant t", "namespace t/ns", "  partitioned topic persistent://t/ns/p (2 partitions)",
        "  topic persistent://t/ns/a: 10 entries; s (acked through 4, 1 more)"]


def test_a_partly_acknowledged_batch_counts_message_by_message() -> None:
    from letterbox.admin.stats import BATCH_ACKED as SERVED
    from letterbox.migrate.plan import BATCH_ACKED

    assert SERVED == BATCH_ACKED  # what the broker serves is what the migration reads
    cursor = {"markDeletePosition": "5:3", "individuallyDeletedMessages": "[(5:5..5:6]]",
              BATCH_ACKED: {"5:4": [0, 2]}}
    acked = acked_through(cursor)
    assert [acked(5, 4, i) for i in range(4)] == [True, False, True, False]
    assert acked(5, 3) and acked(5, 6, 7) and not acked(5, 7, 0)
    sub = SubscriptionPosition("s", 3, frozenset({6}), {4: frozenset({0, 2})})
    assert [sub.is_acked(4, i) for i in range(3)] == [True, False, True]
    assert sub.is_acked(6, 1) and not sub.is_acked(5, 0)
