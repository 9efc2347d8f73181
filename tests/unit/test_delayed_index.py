"""The delayed-entry index: never early, ledger order, compact."""
from __future__ import annotations

import random
import tracemalloc

from letterbox.broker.redelivery.delayed_index import DelayedDeliveryTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_never_pops_before_due_and_returns_ledger_order() -> None:
    clock = Clock()
    t = DelayedDeliveryTracker(clock)
    rnd = random.Random(7)
    due = {}
    for eid in rnd.sample(range(100_000), 5000):
        at = clock.now + rnd.randint(1, 10_000)
        assert t.add(eid, at)
        due[eid] = at
    assert len(t) == 5000
    popped: list[int] = []
    while clock.now < 1_000_000 + 10_001:
        clock.now += rnd.randint(1, 700)
        batch = t.pop_due()
        assert batch == sorted(batch)
        assert all(due[e] <= clock.now for e in batch)
        popped.extend(batch)
        nxt = t.next_due_ms()
        assert nxt is None or nxt > clock.now
    assert sorted(popped) == sorted(due)
    assert len(t) == 0 and t.next_due_ms() is None


def test_already_due_is_refused_and_next_due_is_never_late() -> None:
    clock = Clock()
    t = DelayedDeliveryTracker(clock)
    assert not t.add(1, clock.now)
    assert t.add(2, clock.now + 500)
    nxt = t.next_due_ms()
    assert nxt is not None and nxt <= clock.now + 500  # a bucket start at worst
    assert t.add(3, clock.now + 100)
    nxt = t.next_due_ms()
    assert nxt is not None and nxt <= clock.now + 100
    assert t.pop_due(clock.now + 100) == [3]
    assert t.pop_due(clock.now + 499) == []
    assert t.next_due_ms() == clock.now + 500  # its bucket is open now: exact
    assert t.pop_due(clock.now + 500, limit=5) == [2]


def test_entries_due_in_one_second_stay_compact_until_due() -> None:
    clock = Clock()
    t = DelayedDeliveryTracker(clock)
    due = (clock.now // 1000 + 10) * 1000  # one second, ten seconds from now
    tracemalloc.start()
    for eid in range(200_000):
        t.add(eid, due + eid % 1000)
        t.next_due_ms()  # the broker asks after every add
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB for 200k entries"
    clock.now = due + 999
    assert len(t.pop_due()) == 200_000


def test_limit_and_clear() -> None:
    clock = Clock()
    t = DelayedDeliveryTracker(clock)
    for e in range(10):
        t.add(e, clock.now + 10 + e)
    assert t.pop_due(clock.now + 100, limit=3) == [0, 1, 2]
    assert len(t) == 7
    t.clear()
    assert len(t) == 0 and t.pop_due(clock.now + 10**9) == []


def test_a_million_pending_entries_stay_small() -> None:
    clock = Clock()
    t = DelayedDeliveryTracker(clock)
    rnd = random.Random(1)
    tracemalloc.start()
    for eid in range(1_000_000):
        t.add(eid, clock.now + 1 + rnd.randrange(3_600_000))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 60 * 1024 * 1024, f"{peak / 1e6:.0f} MB"
    clock.now += 3_600_001
    first = t.pop_due(limit=10_000)
    assert first == sorted(first) and len(first) == 10_000
    assert len(t) == 990_000
