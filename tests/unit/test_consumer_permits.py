"""Consumer permits and pending-ack totals without a broker: permits never go
negative (a batch larger than what is left is owed and paid from the next FLOW),
a FLOW is capped at 2^31-1, and PendingAcks keeps its running total exact."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from letterbox.broker.policies.unacked_limits import PendingAcks, unblocked_room
from letterbox.broker.topics.consumer import MAX_PERMITS, Consumer


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


def test_pending_acks_add_quiet_keeps_the_total_without_notifying() -> None:
    seen: list[int] = []
    p = PendingAcks(seen.append)
    p.add_quiet(1, 3)
    p.add_quiet(2, 4)
    assert p.total == 7 and seen == []
    p.add_quiet(1, 1)  # an existing key is set as usual: notified
    assert p.total == 5 and seen == [-2]


def limited_consumer(per_consumer: int, per_sub: int) -> Consumer:
    config = SimpleNamespace(max_unacked_messages_per_consumer=per_consumer,
                             max_unacked_messages_per_subscription=per_sub)
    cnx: Any = SimpleNamespace(service=SimpleNamespace(config=config), writable=True)
    c = Consumer(cnx, consumer_id=1, name="c", sub_type=1)  # Shared: limits apply
    sub: Any = SimpleNamespace(topic=SimpleNamespace(limits=None), blocked_on_unacked=False, consumers=[c],
                               schedule_dispatch=lambda: None)
    c.subscription = sub
    return c


@pytest.mark.parametrize(("per_consumer", "per_sub"), [(10, 0), (0, 7), (10, 7), (5, 50), (0, 0)])
def test_quiet_bookings_below_the_room_block_exactly_where_notified_ones_do(per_consumer: int, per_sub: int) -> None:
    """A dispatch round books quietly while a booking stays below unblocked_room and
    notifies otherwise: the consumer and subscription are blocked after the same entry
    as when every booking is notified."""
    sizes = [1, 3, 1, 2, 1, 1, 4, 1, 1, 2]
    quiet, loud = limited_consumer(per_consumer, per_sub), limited_consumer(per_consumer, per_sub)
    room = unblocked_room(quiet)
    for eid, n in enumerate(sizes):
        if n < room:
            quiet.pending.add_quiet(eid, n)
        else:
            quiet.pending[eid] = n
        room -= n
        loud.pending[eid] = n
        assert quiet.pending.total == loud.pending.total
        assert quiet.blocked_on_unacked == loud.blocked_on_unacked, eid
        assert quiet.subscription is not None and loud.subscription is not None
        assert quiet.subscription.blocked_on_unacked == loud.subscription.blocked_on_unacked, eid
    if per_consumer or per_sub:
        assert loud.blocked_on_unacked or loud.subscription.blocked_on_unacked  # the limits were reached
    else:
        assert room > 1 << 61  # no limit
