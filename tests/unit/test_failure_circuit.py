"""The circuit breaker's pure state machine (failure/circuit.py), backoff jitter and
their consumer properties: no broker, no clock but the numbers passed in."""
from __future__ import annotations

import pytest

from letterbox.failure import Backoff, Circuit, CircuitPolicy, CircuitState, Jitter, PolicyError
from letterbox.failure.consumer_properties import policy_from_consumer_properties

T0 = 1_000_000


def tripped(c: Circuit, ids: list[int], now: int = T0) -> bool:
    return not c.failed(ids, now).counted


def test_defaults_need_20_deliveries_half_failing_across_5_messages() -> None:
    c = Circuit(CircuitPolicy())
    assert c.failed(list(range(19)), T0).counted  # 19 failures: not enough deliveries
    v = c.failed([19], T0 + 1)
    assert not v.counted and v.transition is not None and v.transition.cause == "trip"
    assert v.uncount == {i: 1 for i in range(19)}  # the earlier failures in the window are given back
    assert c.state is CircuitState.OPEN and c.allowance() == 0


def test_one_message_failing_many_times_is_poison_not_an_outage() -> None:
    c = Circuit(CircuitPolicy())
    for i in range(40):
        assert c.failed([7], T0 + i).counted
    assert c.state is CircuitState.CLOSED


def test_successes_keep_the_rate_below_the_threshold() -> None:
    c = Circuit(CircuitPolicy())
    c.succeeded(30, [], T0)
    assert c.failed(list(range(29)), T0).counted  # 29 of 59 < 50 %
    assert tripped(c, [29, 30])  # 31 of 61 >= 50 %


def test_failures_outside_the_window_do_not_count() -> None:
    c = Circuit(CircuitPolicy(window_ms=1000))
    assert c.failed(list(range(15)), T0).counted
    assert c.failed(list(range(15, 30)), T0 + 1000).counted  # the first 15 left the window
    assert c.window() == (15, 15, 15)


def test_cool_down_probe_close_and_reopen() -> None:
    c = Circuit(CircuitPolicy(min_deliveries=5, cooldown_ms=30_000))
    assert tripped(c, [1, 2, 3, 4, 5])
    assert c.cooled(T0 + 29_999) is None
    t = c.cooled(T0 + 30_000)
    assert t is not None and c.state is CircuitState.HALF_OPEN and c.allowance() == 1
    assert c.probe_sent(3) and not c.probe_sent(4)
    assert c.allowance() == 0
    assert not c.failed([4], T0 + 30_001).counted and c.state is CircuitState.HALF_OPEN  # not the probe
    v = c.failed([3], T0 + 30_002)
    assert v.transition is not None and v.transition.cause == "reopen" and v.transition.probe == 3
    assert c.state is CircuitState.OPEN and c.reopen_at_ms == T0 + 60_002
    c.cooled(T0 + 60_002)
    c.probe_sent(5)
    t = c.succeeded(1, [5], T0 + 60_003)
    assert t is not None and t.cause == "close" and c.state is CircuitState.CLOSED and c.allowance() is None


def test_operator_open_and_close() -> None:
    c = Circuit(CircuitPolicy())
    t = c.force(CircuitState.OPEN, T0)
    assert t is not None and t.cause == "admin-open" and c.state is CircuitState.OPEN
    assert c.force(CircuitState.OPEN, T0) is None
    assert c.force(CircuitState.HALF_OPEN, T0) is None
    t = c.force(CircuitState.CLOSED, T0)
    assert t is not None and t.cause == "admin-close"


@pytest.mark.parametrize("field", ["failure_percent", "min_deliveries", "window_ms", "min_distinct",
                                   "cooldown_ms"])
def test_policy_bounds_name_the_field(field: str) -> None:
    with pytest.raises(PolicyError, match=field):
        CircuitPolicy(**{field: 0})
    with pytest.raises(PolicyError, match="failure_percent"):
        CircuitPolicy(failure_percent=101)


def test_jitter_full_and_equal() -> None:
    full = Backoff(1000, 60_000, 2.0, Jitter.FULL, rng=lambda: 0.25)
    equal = Backoff(1000, 60_000, 2.0, Jitter.EQUAL, rng=lambda: 0.5)
    none = Backoff(1000, 60_000, 2.0)
    assert none.delay_ms(2) == 4000
    assert full.delay_ms(2) == 1000  # a quarter of 4 s
    assert equal.delay_ms(2) == 3000  # 2 s + half of the other 2 s
    assert Backoff(1000, 60_000, 2.0, Jitter.EQUAL, rng=lambda: 0.999).delay_ms(10) > 30_000


def test_consumer_properties_circuit_and_jitter() -> None:
    p = policy_from_consumer_properties({"letterbox.circuit.enabled": "true"})
    assert p.circuit == CircuitPolicy()
    p = policy_from_consumer_properties({"letterbox.circuit.min_deliveries": "100",
                                         "letterbox.circuit.cooldown_ms": "5000"})
    assert p.circuit == CircuitPolicy(min_deliveries=100, cooldown_ms=5000)
    assert policy_from_consumer_properties({}).circuit is None
    p = policy_from_consumer_properties({"letterbox.backoff.min_ms": "100", "letterbox.backoff.jitter": "Equal"})
    assert p.backoff is not None and p.backoff.jitter is Jitter.EQUAL


@pytest.mark.parametrize(("props", "named"), [
    ({"letterbox.circuit.enabled": "yes"}, "letterbox.circuit.enabled"),
    ({"letterbox.circuit.failure_percent": "150"}, "failure_percent"),
    ({"letterbox.circuit.window_ms": "soon"}, "letterbox.circuit.window_ms"),
    ({"letterbox.circuit.enabled": "false", "letterbox.circuit.min_distinct": "3"}, "contradict"),
    ({"letterbox.backoff.jitter": "full"}, "letterbox.backoff.min_ms"),
    ({"letterbox.backoff.min_ms": "10", "letterbox.backoff.jitter": "some"}, "letterbox.backoff.jitter"),
    ({"letterbox.circuit.cooldown": "5"}, "letterbox.circuit.cooldown"),
])
def test_bad_properties_name_the_key(props: dict[str, str], named: str) -> None:
    with pytest.raises(PolicyError, match=named):
        policy_from_consumer_properties(props)
