"""Consumer permits and pending-ack totals without a broker: permits never go
negative (a batch larger than what is left is owed and paid from the next FLOW),
a FLOW is capped at 2^31-1, and PendingAcks keeps its running total exact."""
from __future__ import annotations

from typing import Any

from letterbox.broker.consumer import MAX_PERMITS, Consumer
from letterbox.broker.unacked_limits import PendingAcks


def consumer() -> Consumer:
    cnx: Any = None  # permits and pending bookkeeping never touch the connection
    return Consumer(cnx, consumer_id=1, name="c", sub_type=1)


def test_a_batch_bigger_than_the_permits_is_owed_not_negative() -> None:
    c = consumer()
    c.add_permits(5)
    c.take_permits(8)
    assert (c.permits, c.permits_owed) == (0, 3)
    c.add_permits(2)  # pays part of the debt
    assert (c.permits, c.permits_owed) == (0, 1)
    c.add_permits(10)
    assert (c.permits, c.permits_owed) == (9, 0)  # same net as Pulsar's 5 - 8 + 2 + 10


def test_flow_is_capped_and_never_negative() -> None:
    c = consumer()
    for _ in range(3):
        c.add_permits(2**32 - 1)
    assert c.permits == MAX_PERMITS
    c.add_permits(-100)
    assert c.permits == MAX_PERMITS
    c.take_permits(MAX_PERMITS + 10)
    assert (c.permits, c.permits_owed) == (0, 10)


def test_pending_acks_total_follows_every_change() -> None:
    seen: list[int] = []
    p = PendingAcks(seen.append)
    p[1] = 10
    p[2] = 5
    p[1] = 7  # replaced: -3
    del p[2]
    assert p.pop(9, None) is None
    assert p.pop(1) == 7
    p[3] = 4
    p.clear()
    assert seen == [10, 5, -3, -5, -7, 4, -4]
    assert p.total == 0 and not p


def test_pending_acks_discard_many_notifies_once_and_returns_the_absent() -> None:
    seen: list[int] = []
    p = PendingAcks(seen.append)
    for eid in range(5):
        p[eid] = 2
    seen.clear()
    assert p.discard_many([1, 3, 9, 4, 1]) == [9, 1]  # 1 a second time is absent by then
    assert seen == [-6]
    assert p.total == 4 and sorted(p) == [0, 2]
    assert p.discard_many([7]) == [7] and seen == [-6]  # nothing removed: no notification
