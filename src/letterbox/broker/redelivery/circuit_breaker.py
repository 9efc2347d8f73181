# The circuit breaker of one subscription, broker side: it holds the pure
# state machine (letterbox.failure.circuit.Circuit) for the subscription's
# policy (`policy.circuit`, from the consumers' letterbox.circuit.* properties
# or the namespace's letterbox_circuit_breaker), its cool-down timer on the
# broker's clock, and the recent transitions. The redelivery tracker reports
# failures (and applies the Verdict: counts given back, nothing counted while
# open), the subscription reports acknowledgements, the dispatcher asks
# `allowance()` before each round and reports what it sends (`sent`).
# Every state change goes through `_changed`, the one place that records it
# (history, the attempt log of the message concerned, a `circuit` failure event on
# the namespace's failure events topic when it opted in), arms or drops the timer,
# wakes the dispatcher and calls `on_change` (None: nobody else listens).
# Invariants: a subscription without a circuit policy has no Circuit and pays
# one attribute look per ack and dispatch round; a policy change starts a fresh
# closed Circuit; the timer is armed exactly while the circuit is open.
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from letterbox.broker.moves.failure_events import publish_failure_event
from letterbox.failure.attempts import CIRCUIT_CLOSE, CIRCUIT_PROBE, CIRCUIT_TRIP
from letterbox.failure.circuit import (
    TRIP,
    Circuit,
    CircuitPolicy,
    CircuitState,
    Transition,
    Verdict,
)
from letterbox.failure.events import CIRCUIT, failure_event

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedSubscription
    from letterbox.clock import Clock, Timer

HISTORY = 20  # transitions kept per subscription (stats and the admin API show them)
MAX_TRIPPED = 100_000  # messages of a trip remembered for their `circuit-closed` row
# the /metrics family of circuit_gauge (admin/metrics.py)
CIRCUIT_FAMILY = ("letterbox_subscription_circuit_state", "gauge",
                  "The subscription's circuit breaker: 0 closed (or off), 1 open, 2 half-open (probing)")
CircuitListener = Callable[["TrackedSubscription", Transition], None]


class CircuitBreaker:
    def __init__(self, sub: TrackedSubscription, clock: Clock, closed: Callable[[], None]) -> None:
        """`closed`: called when the circuit closes (the tracker releases failed probes)."""
        self.sub = sub
        self._closed = closed
        self.clock = clock
        self.circuit: Circuit | None = None
        self.history: deque[Transition] = deque(maxlen=HISTORY)
        self.on_change: CircuitListener | None = None
        self._timer: Timer | None = None
        self._tripped: set[int] = set()  # the messages of the last trip (their close row)

    def _current(self) -> Circuit | None:
        policy: CircuitPolicy | None = self.sub.policy.circuit
        circuit = self.circuit
        if circuit is not None and circuit.policy != policy:  # removed or changed: start afresh
            self._drop_timer()
            if circuit.state is not CircuitState.CLOSED:  # what it held back flows again
                self._tripped = set()
                self._closed()
                self.sub.dispatcher.schedule()
            circuit = self.circuit = None
        if policy is not None and circuit is None:
            circuit = self.circuit = Circuit(policy)
        return circuit

    @property
    def state(self) -> CircuitState:
        circuit = self._current()
        return circuit.state if circuit is not None else CircuitState.CLOSED

    @property
    def enabled(self) -> bool:
        return self._current() is not None

    # --- reports ------------------------------------------------------------------------
    def failed(self, entry_ids: list[int]) -> Verdict | None:
        """The deliveries of `entry_ids` failed; None: no circuit (count them as usual)."""
        circuit = self._current()
        if circuit is None:
            return None
        verdict = circuit.failed(entry_ids, self.clock.now_ms())
        if verdict.transition is not None:
            t = verdict.transition
            concerned = list(dict.fromkeys([*verdict.uncount, *entry_ids])) if t.cause == TRIP \
                else [t.probe] if t.probe is not None else []
            self._changed(t, concerned)
        return verdict

    def succeeded(self, entry_ids: Iterable[int], n: int) -> None:
        circuit = self.circuit  # (no policy look per ack: _current runs on failures and rounds)
        if circuit is not None:
            t = circuit.succeeded(n, entry_ids, self.clock.now_ms())
            if t is not None:
                self._changed(t, [])

    def acked_through(self, upto: int) -> None:
        circuit = self.circuit
        if circuit is not None:
            t = circuit.acked_through(upto, self.clock.now_ms())
            if t is not None:
                self._changed(t, [])

    def allowance(self) -> int | None:
        circuit = self._current()
        return circuit.allowance() if circuit is not None else None

    def sent(self, entry_id: int) -> None:
        """The dispatcher sends `entry_id` while the circuit allows one: the probe."""
        circuit = self.circuit
        if circuit is not None and circuit.probe_sent(entry_id):
            self._row(entry_id, CIRCUIT_PROBE, "circuit half-open: this message is the probe")

    def force(self, state: CircuitState) -> Transition | None:
        """An operator opens or closes the circuit; None when it is that already."""
        circuit = self._current()
        if circuit is None:
            return None
        t = circuit.force(state, self.clock.now_ms())
        if t is not None:
            self._changed(t, [])
        return t

    # --- the one place a change is applied -----------------------------------------
    def _changed(self, t: Transition, entry_ids: list[int]) -> None:
        self.history.append(t)
        if t.after is CircuitState.OPEN:
            reason = f"circuit {t.cause}: {t.detail}; failures while open are not counted"
            self._rows(entry_ids, CIRCUIT_TRIP, reason)
            if t.cause == TRIP:
                self._tripped = set(entry_ids[:MAX_TRIPPED])
            self._arm()
        else:
            self._drop_timer()
            if t.after is CircuitState.CLOSED:
                tripped, self._tripped = self._tripped, set()
                self._rows(sorted(tripped), CIRCUIT_CLOSE, f"circuit closed ({t.cause}): {t.detail}")
                self._closed()
            self.sub.dispatcher.schedule()
        sub = self.sub
        publish_failure_event(sub.topic.service, failure_event(
            CIRCUIT, time_ms=t.at_ms, topic=str(sub.topic.name), subscription=sub.name, message_id=None,
            reason=t.detail or None, state=t.after.value, previous=t.before.value, cause=t.cause))
        if self.on_change is not None:
            self.on_change(sub, t)

    def _row(self, entry_id: int, ending: str, reason: str) -> None:
        self._rows([entry_id], ending, reason)

    def _rows(self, entry_ids: list[int], ending: str, reason: str) -> None:
        """One attempt-log row each (acknowledged messages get none)."""
        if entry_ids:
            row = (0, self.clock.now_ms(), None, None, ending, reason)
            limit = self.sub.topic.service.config.attempt_log_size
            self.sub.cursor.add_attempts([(eid, row) for eid in entry_ids], limit)

    def _arm(self) -> None:
        self._drop_timer()
        circuit = self.circuit
        if circuit is not None:
            self._timer = self.clock.call_at(circuit.reopen_at_ms, self._cooled)

    def _cooled(self) -> None:
        self._timer = None
        circuit = self.circuit
        if circuit is None:
            return
        t = circuit.cooled(self.clock.now_ms())
        if t is not None:
            self._changed(t, [])
        elif circuit.state is CircuitState.OPEN:
            self._arm()

    def _drop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def describe(self) -> dict[str, object]:
        """The circuit as stats and the admin API show it."""
        circuit = self._current()
        out: dict[str, object] = {"enabled": circuit is not None, "state": self.state.value}
        if circuit is not None:
            deliveries, failures, distinct = circuit.window()
            p = circuit.policy
            out.update({
                "trips": circuit.trips,
                "openedAt": circuit.opened_at_ms or None,
                "probeAt": circuit.reopen_at_ms if circuit.state is CircuitState.OPEN else None,
                "window": {"deliveries": deliveries, "failures": failures, "distinctMessages": distinct},
                "policy": {"failurePercent": p.failure_percent, "minDeliveries": p.min_deliveries,
                           "windowMs": p.window_ms, "minDistinct": p.min_distinct, "cooldownMs": p.cooldown_ms},
            })
        out["history"] = [{"at": t.at_ms, "from": t.before.value, "to": t.after.value, "cause": t.cause,
                           "detail": t.detail} for t in self.history]
        return out


def breaker_of(sub: object) -> CircuitBreaker | None:
    """The circuit breaker of a subscription (None: a non-persistent one has none)."""
    breaker = getattr(getattr(sub, "tracker", None), "circuit", None)
    return breaker if isinstance(breaker, CircuitBreaker) else None


def circuit_gauge(sub: object) -> int:
    """letterbox_subscription_circuit_state: 0 closed (or no circuit), 1 open, 2 half-open."""
    breaker = breaker_of(sub)
    return breaker.state.gauge if breaker is not None else 0
