"""The broker's CircuitBreaker (broker/redelivery/circuit_breaker.py) with a fake
subscription and the manual clock: every state change reaches `on_change` once, in order;
the cool-down timer turns the circuit half-open; a policy removed drops the circuit."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from letterbox.broker import CircuitBreaker
from letterbox.clock import ManualClock
from letterbox.failure import CircuitPolicy, CircuitState, FailurePolicy, Transition

T0 = 1_800_000_000_000


@dataclass
class FakeCursor:
    rows: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)

    def add_attempts(self, rows: list[tuple[int, tuple[Any, ...]]], limit: int) -> None:
        self.rows.extend(rows)


@dataclass
class FakeDispatcher:
    scheduled: int = 0

    def schedule(self) -> None:
        self.scheduled += 1


class FakeSub:
    def __init__(self) -> None:
        self.policy = FailurePolicy(circuit=CircuitPolicy(min_deliveries=5, cooldown_ms=1000))
        self.cursor = FakeCursor()
        self.dispatcher = FakeDispatcher()
        self.name = "work"
        self.topic = type("T", (), {"name": "persistent://public/default/t",
                                    "service": type("S", (), {"config": type("C", (), {"attempt_log_size": 10})})})


def test_every_change_goes_through_on_change_in_order() -> None:
    clock = ManualClock(T0)
    sub = FakeSub()
    closed: list[bool] = []
    breaker = CircuitBreaker(sub, clock, lambda: closed.append(True))  # type: ignore[arg-type]
    seen: list[Transition] = []
    breaker.on_change = lambda _sub, t: seen.append(t)
    verdict = breaker.failed([1, 2, 3, 4, 5])
    assert verdict is not None and not verdict.counted
    assert breaker.state is CircuitState.OPEN and breaker.allowance() == 0
    assert {eid for eid, row in sub.cursor.rows if row[4] == "circuit-open"} == {1, 2, 3, 4, 5}
    clock.advance(1000)  # the cool-down timer fires
    assert breaker.state is CircuitState.HALF_OPEN and breaker.allowance() == 1
    breaker.sent(3)
    assert (3, "circuit-probe") in [(eid, row[4]) for eid, row in sub.cursor.rows]
    breaker.succeeded([3], 1)
    assert breaker.state is CircuitState.CLOSED and closed == [True]
    assert {eid for eid, row in sub.cursor.rows if row[4] == "circuit-closed"} == {1, 2, 3, 4, 5}
    assert [t.cause for t in seen] == ["trip", "probe", "close"]
    breaker.force(CircuitState.OPEN)
    breaker.force(CircuitState.CLOSED)
    assert [t.cause for t in seen][-2:] == ["admin-open", "admin-close"]
    assert [h["cause"] for h in breaker.describe()["history"]] == [
        "trip", "probe", "close", "admin-open", "admin-close"]


def test_without_a_policy_there_is_no_circuit() -> None:
    sub = FakeSub()
    sub.policy = FailurePolicy()
    breaker = CircuitBreaker(sub, ManualClock(T0), lambda: None)  # type: ignore[arg-type]
    assert breaker.failed([1, 2, 3, 4, 5, 6]) is None
    assert breaker.allowance() is None and not breaker.enabled
    assert breaker.describe() == {"enabled": False, "state": "closed", "history": []}


def test_a_policy_removed_while_open_lets_everything_flow_again() -> None:
    clock = ManualClock(T0)
    sub = FakeSub()
    released: list[bool] = []
    breaker = CircuitBreaker(sub, clock, lambda: released.append(True))  # type: ignore[arg-type]
    breaker.failed([1, 2, 3, 4, 5])
    assert breaker.state is CircuitState.OPEN
    sub.policy = FailurePolicy()
    assert breaker.allowance() is None and released == [True] and sub.dispatcher.scheduled == 1
    assert clock.pending_timers() == 0
