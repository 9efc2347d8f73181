# The broker's manual clock seen from a test: read "now" and move it on. For a
# broker in a child process (or any object with an admin() call, as a Broker)
# this goes through the admin API's clock routes (GET /admin/v2/letterbox/clock,
# POST .../clock/advance?ms=N); an embedded broker is reached on its own event
# loop instead (Broker.clock_in_process), with the same answer and no HTTP. Times
# are timezone-aware UTC datetimes; an advance answers once every broker timer
# that fell due on the way has fired.
from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from letterbox.testing.errors import AdminCallError, ManualClockError

CLOCK_PATH = "/admin/v2/letterbox/clock"
REAL_CLOCK = ("the broker runs the real clock: start it with the manual clock "
              "(Broker(clock='manual'), or pytest --letterbox-clock manual)")


class AdminCaller(Protocol):
    def admin(self, method: str, path: str, body: Any = None) -> Any: ...


class BrokerClock:
    """The manual clock of one broker."""

    def __init__(self, broker: AdminCaller) -> None:
        self._broker = broker

    def _call(self, advance_ms: int | None) -> dict[str, Any]:
        """{"clock": "real"|"manual", "nowMs": ...} after advancing by advance_ms (if given)."""
        in_process: Callable[[int | None], dict[str, Any] | None] | None = \
            getattr(self._broker, "clock_in_process", None)
        state = in_process(advance_ms) if in_process is not None else None
        if state is None:
            try:
                state = self._broker.admin("GET", CLOCK_PATH) if advance_ms is None else \
                    self._broker.admin("POST", f"{CLOCK_PATH}/advance?ms={advance_ms}")
            except AdminCallError as exc:
                if exc.status == 409:  # the route's answer on a real clock
                    raise ManualClockError(REAL_CLOCK) from None
                raise
        if state.get("clock") != "manual":
            raise ManualClockError(REAL_CLOCK)
        return dict(state)

    def now_ms(self) -> int:
        """The broker's time in milliseconds since the epoch."""
        return int(self._call(None)["nowMs"])

    def now(self) -> datetime:
        """The broker's time as a UTC datetime."""
        return datetime.fromtimestamp(self.now_ms() / 1000, UTC)

    def advance(self, by: timedelta | int) -> datetime:
        """Move the broker's time on by `by` (a timedelta, or milliseconds); every broker
        timer that falls due on the way fires, in time order. Returns the new time."""
        ms = int(by.total_seconds() * 1000) if isinstance(by, timedelta) else int(by)
        if ms < 0:
            raise ValueError(f"the clock only moves forward: advance by {by!r}")
        return datetime.fromtimestamp(int(self._call(ms)["nowMs"]) / 1000, UTC)

    def advance_to(self, when: datetime) -> datetime:
        """Move the broker's time on to `when` (nothing happens if it is already there)."""
        return self.advance(max(when - self.now(), timedelta(0)))
