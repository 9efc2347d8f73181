# The broker's clock over HTTP (letterbox/clock.py), for tests:
#   GET  /admin/v2/letterbox/clock              {"clock", "nowMs", "wallMs", "ttlCheckedAtMs",
#                                               "pendingTimers", "nextTimerMs"}
#   POST /admin/v2/letterbox/clock/advance?ms=N move a manual clock N ms on, firing
#                                               the backoff, delayed-delivery, TTL,
#                                               retention and redrive timers due on the way
# Advancing is refused (409) on a broker running the real clock, and ms must be
# a whole number from 0 to ten years (400 otherwise). Both are super-user
# routes (admin/access_rules.py): time is broker-wide.
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.clock import MAX_ADVANCE_MS, ManualClock, wall_ms

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

CLOCK_PATH = "/admin/v2/letterbox/clock"


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = ClockRoutes(admin)
    router.add_get(CLOCK_PATH, routes.get_clock)
    router.add_post(CLOCK_PATH + "/advance", routes.advance)


class ClockRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.service = admin.service

    def _state(self) -> dict[str, object]:
        clock = self.service.clock
        state: dict[str, object] = {"clock": clock.kind, "nowMs": clock.now_ms(), "wallMs": wall_ms(),
                                    "ttlCheckedAtMs": self.service.expiry.checked_at_ms or None}
        if isinstance(clock, ManualClock):
            state["pendingTimers"] = clock.pending_timers()
            state["nextTimerMs"] = clock.next_timer_ms()
        return state

    async def get_clock(self, request: web.Request) -> web.Response:
        return web.json_response(self._state())

    async def advance(self, request: web.Request) -> web.Response:
        clock = self.service.clock
        if not isinstance(clock, ManualClock):
            raise AdminError(409, "this broker runs the real clock, which cannot be advanced: start it with "
                                  "--clock manual --allow-test-clock (tests only) to control time")
        raw = request.query.get("ms")
        if raw is None:
            raise AdminError(400, "query parameter ms (milliseconds to advance the clock by) is required")
        try:
            ms = int(raw.strip())
        except ValueError:
            raise AdminError(400, f"ms must be a whole number of milliseconds, got {raw!r}") from None
        if not 0 <= ms <= MAX_ADVANCE_MS:
            raise AdminError(400, f"ms must be between 0 and {MAX_ADVANCE_MS} (the clock only moves "
                                  f"forward, at most ten years at a time), got {ms}")
        fired = clock.advance(ms)
        await asyncio.sleep(0)  # let the woken timers' first steps run before answering
        return web.json_response({**self._state(), "advancedMs": ms, "timersFired": fired})
