# Outage detection: the circuit breaker of one subscription, as a pure state
# machine. It tells an outage (most deliveries of many messages failing at once:
# the database behind the consumer is down) from a poison message (one message
# failing again and again), so an outage does not burn the retries of healthy
# messages and flood the dead letter topic.
#
#   closed     deliveries flow; each ended delivery (ack: success; nack, ack
#              timeout, redeliver-all, consumer gone: failure) enters a sliding
#              window of `window_ms`. It trips when, within the window, at least
#              `min_deliveries` deliveries ended, at least `failure_percent` % of
#              them failed, and the failures span at least `min_distinct` messages.
#   open       nothing is dispatched; failures are not counted toward
#              dead-lettering, and the trip gives back the counts of the failures
#              in the window that tripped it (`Trip.uncount`): the messages keep
#              their pre-outage counts. After `cooldown_ms` it turns half-open.
#   half-open  one message (the probe) is dispatched; its ack closes the circuit,
#              its failure (not counted either) opens it for another cool-down.
#
# Pure: no I/O and no clock of its own (the caller passes the broker's time);
# the broker holds one Circuit per subscription with its timer and applies the
# Verdicts and Transitions (broker/redelivery/circuit_breaker.py).
# Invariants: the window holds only deliveries that ended within `window_ms` of
# the latest event (successes merged per 1/64 of the window, so their memory is
# bounded; failures one per delivery, at most MAX_WINDOW_FAILURES, the oldest
# dropped first); it is empty whenever the circuit is not closed; at most one
# probe is out, and only in half-open.
from __future__ import annotations

import enum
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from letterbox.failure.errors import PolicyError
from letterbox.failure.limits import MAX_DELAY_MS

DEFAULT_FAILURE_PERCENT = 50
DEFAULT_MIN_DELIVERIES = 20
DEFAULT_WINDOW_MS = 30_000
DEFAULT_MIN_DISTINCT = 5
DEFAULT_COOLDOWN_MS = 30_000
MAX_WINDOW_FAILURES = 100_000


class CircuitState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"

    @property
    def gauge(self) -> int:
        """The value of letterbox_subscription_circuit_state: 0 closed, 1 open, 2 half-open."""
        return _GAUGE[self]


_GAUGE = {CircuitState.CLOSED: 0, CircuitState.OPEN: 1, CircuitState.HALF_OPEN: 2}

# the causes of a transition
TRIP = "trip"
PROBE = "probe"  # half-open: the cool-down is over (the probe goes out with the next dispatch)
CLOSE = "close"  # the probe was acknowledged
REOPEN = "reopen"  # the probe failed
ADMIN_OPEN = "admin-open"
ADMIN_CLOSE = "admin-close"


@dataclass(frozen=True)
class CircuitPolicy:
    failure_percent: int = DEFAULT_FAILURE_PERCENT
    min_deliveries: int = DEFAULT_MIN_DELIVERIES
    window_ms: int = DEFAULT_WINDOW_MS
    min_distinct: int = DEFAULT_MIN_DISTINCT
    cooldown_ms: int = DEFAULT_COOLDOWN_MS

    def __post_init__(self) -> None:
        _check("failure_percent", self.failure_percent, 1, 100)
        _check("min_deliveries", self.min_deliveries, 1, 1_000_000)
        _check("window_ms", self.window_ms, 1, MAX_DELAY_MS)
        _check("min_distinct", self.min_distinct, 1, 1_000_000)
        _check("cooldown_ms", self.cooldown_ms, 1, MAX_DELAY_MS)


def _check(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise PolicyError(f"circuit breaker {name} must be an integer from {low} to {high}, got {value!r}")


@dataclass(frozen=True)
class Transition:
    before: CircuitState
    after: CircuitState
    cause: str
    at_ms: int
    detail: str = ""
    probe: int | None = None  # the probe's entry id (close, reopen)


@dataclass(frozen=True)
class Verdict:
    """What to do with the failures just reported: `counted` False: do not count them
    toward dead-lettering; `uncount`: entry id -> earlier failures to take back (a trip);
    `transition`: the state change they caused, if any."""

    counted: bool
    uncount: dict[int, int] = field(default_factory=dict)
    transition: Transition | None = None


COUNTED = Verdict(True)
NOT_COUNTED = Verdict(False)


class Circuit:
    def __init__(self, policy: CircuitPolicy) -> None:
        self.policy = policy
        self.state = CircuitState.CLOSED
        self.opened_at_ms = 0
        self.probe: int | None = None  # the entry id of the probe out (half-open only)
        self.trips = 0
        self._successes: deque[tuple[int, int]] = deque()  # (ended at, how many)
        self._failures: deque[tuple[int, int]] = deque()  # (ended at, entry id)
        self._ok = 0
        self._failed: dict[int, int] = {}  # entry id -> failures in the window

    # --- what the broker reports ---------------------------------------------------
    def succeeded(self, n: int, entry_ids: Iterable[int], now_ms: int) -> Transition | None:
        """`n` deliveries were acknowledged (`entry_ids`: the acknowledged entries, looked
        at only while a probe is out)."""
        if self.state is CircuitState.CLOSED:
            successes = self._successes
            if successes and now_ms - successes[-1][0] < max(self.policy.window_ms >> 6, 1):
                successes[-1] = (successes[-1][0], successes[-1][1] + n)  # (expires with its bucket's start)
            else:
                successes.append((now_ms, n))
            self._ok += n
            self._prune(now_ms)
            return None
        if self.state is CircuitState.HALF_OPEN and self.probe is not None and self.probe in set(entry_ids):
            return self._move(CircuitState.CLOSED, CLOSE, now_ms, f"probe {self.probe} acknowledged")
        return None

    def acked_through(self, upto: int, now_ms: int) -> Transition | None:
        """A cumulative acknowledgement of everything up to entry `upto`."""
        if self.state is CircuitState.HALF_OPEN and self.probe is not None and self.probe <= upto:
            return self.succeeded(1, (self.probe,), now_ms)
        return self.succeeded(1, (), now_ms)

    def failed(self, entry_ids: list[int], now_ms: int) -> Verdict:
        """The deliveries of `entry_ids` failed."""
        if self.state is CircuitState.OPEN:
            return NOT_COUNTED
        if self.state is CircuitState.HALF_OPEN:
            if self.probe is not None and self.probe in entry_ids:
                t = self._move(CircuitState.OPEN, REOPEN, now_ms, f"probe {self.probe} failed")
                return Verdict(False, transition=t)
            return NOT_COUNTED
        failed, failures = self._failed, self._failures
        for eid in entry_ids:
            failures.append((now_ms, eid))
            failed[eid] = failed.get(eid, 0) + 1
        while len(failures) > MAX_WINDOW_FAILURES:
            self._drop_oldest_failure()
        self._prune(now_ms)
        n_failed = len(self._failures)
        total = n_failed + self._ok
        p = self.policy
        if total < p.min_deliveries or n_failed * 100 < p.failure_percent * total or len(failed) < p.min_distinct:
            return COUNTED
        now_failed = Counter(entry_ids)
        uncount = {}  # the earlier failures in the window (this request's are not counted at all)
        for eid, k in failed.items():
            k -= now_failed.get(eid, 0)
            if k > 0:
                uncount[eid] = k
        detail = (f"{n_failed} of {total} deliveries failed within {p.window_ms} ms, "
                  f"across {len(failed)} messages")
        self.trips += 1
        return Verdict(False, uncount, self._move(CircuitState.OPEN, TRIP, now_ms, detail))

    def cooled(self, now_ms: int) -> Transition | None:
        """The cool-down timer fired: open turns half-open once `cooldown_ms` have passed."""
        if self.state is CircuitState.OPEN and now_ms >= self.reopen_at_ms:
            return self._move(CircuitState.HALF_OPEN, PROBE, now_ms, "cool-down over: one probe goes out")
        return None

    def probe_sent(self, entry_id: int) -> bool:
        """The dispatcher sends `entry_id`; True when it is the probe."""
        if self.state is CircuitState.HALF_OPEN and self.probe is None:
            self.probe = entry_id
            return True
        return False

    def force(self, state: CircuitState, now_ms: int) -> Transition | None:
        """An operator opens or closes the circuit (half-open is reached by the cool-down)."""
        if state is self.state or state is CircuitState.HALF_OPEN:
            return None
        cause = ADMIN_OPEN if state is CircuitState.OPEN else ADMIN_CLOSE
        return self._move(state, cause, now_ms, "set by an operator")

    # --- what the dispatcher asks ------------------------------------------------------
    def allowance(self) -> int | None:
        """How many entries may be dispatched now: None any, 0 none (open, or the probe is
        out), 1 the probe."""
        if self.state is CircuitState.CLOSED:
            return None
        if self.state is CircuitState.HALF_OPEN and self.probe is None:
            return 1
        return 0

    @property
    def reopen_at_ms(self) -> int:
        return self.opened_at_ms + self.policy.cooldown_ms

    def window(self) -> tuple[int, int, int]:
        """(deliveries, failures, distinct failed messages) in the window now."""
        return len(self._failures) + self._ok, len(self._failures), len(self._failed)

    # --- inside ---------------------------------------------------------------------------
    def _move(self, after: CircuitState, cause: str, now_ms: int, detail: str) -> Transition:
        t = Transition(self.state, after, cause, now_ms, detail, self.probe)
        self.state = after
        self.probe = None
        if after is CircuitState.OPEN:
            self.opened_at_ms = now_ms
        self._successes.clear()
        self._failures.clear()
        self._failed.clear()
        self._ok = 0
        return t

    def _prune(self, now_ms: int) -> None:
        horizon = now_ms - self.policy.window_ms
        successes, failures = self._successes, self._failures
        while successes and successes[0][0] <= horizon:
            self._ok -= successes.popleft()[1]
        while failures and failures[0][0] <= horizon:
            self._drop_oldest_failure()

    def _drop_oldest_failure(self) -> None:
        eid = self._failures.popleft()[1]
        k = self._failed[eid] - 1
        if k:
            self._failed[eid] = k
        else:
            del self._failed[eid]
