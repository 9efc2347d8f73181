# The broker's manual clock seen from a test: read "now" and move it on, through
# the admin API's clock routes (GET /admin/v2/letterbox/clock, POST
# .../clock/advance?ms=N), so it works the same for an embedded broker and a
# child process. Times are timezone-aware UTC datetimes; an advance answers
# once every broker timer that fell due on the way has fired.
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

CLOCK_PATH = "/admin/v2/letterbox/clock"


class AdminCaller(Protocol):
    def admin(self, method: str, path: str, body: Any = None) -> Any: ...


class ManualClockError(RuntimeError):
    """The broker does not run the manual clock."""


class BrokerClock:
    """The manual clock of one broker."""

    def __init__(self, broker: AdminCaller) -> None:
        self._broker = broker

    def now_ms(self) -> int:
        """The broker's time in milliseconds since the epoch."""
        state = self._broker.admin("GET", CLOCK_PATH)
        if state.get("clock") != "manual":
            raise ManualClockError("the broker runs the real clock: start it with the manual clock "
                                   "(Broker(clock='manual'), or pytest --letterbox-clock manual)")
        return int(state["nowMs"])

    def now(self) -> datetime:
        """The broker's time as a UTC datetime."""
        return datetime.fromtimestamp(self.now_ms() / 1000, UTC)

    def advance(self, by: timedelta | int) -> datetime:
        """Move the broker's time on by `by` (a timedelta, or milliseconds); every broker
        timer that falls due on the way fires, in time order. Returns the new time."""
        ms = int(by.total_seconds() * 1000) if isinstance(by, timedelta) else int(by)
        if ms < 0:
            raise ValueError(f"the clock only moves forward: advance by {by!r}")
        state = self._broker.admin("POST", f"{CLOCK_PATH}/advance?ms={ms}")
        return datetime.fromtimestamp(int(state["nowMs"]) / 1000, UTC)

    def advance_to(self, when: datetime) -> datetime:
        """Move the broker's time on to `when` (nothing happens if it is already there)."""
        return self.advance(max(when - self.now(), timedelta(0)))
