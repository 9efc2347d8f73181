"""Edges of the manual clock (letterbox/clock.py, admin/routes_clock.py): the largest
advance the API accepts, and values it must refuse, never stall or break the broker."""
from __future__ import annotations

import threading
import time
from typing import Any

from letterbox.clock import MAX_ADVANCE_MS
from tests.admin.helpers import call
from tests.conftest import BrokerProcess

MANUAL = ["--clock", "manual", "--allow-test-clock"]
CLOCK = "/admin/v2/letterbox/clock"


def test_a_ten_year_advance_answers_at_once_and_never_stalls_the_broker(broker_factory: Any) -> None:
    # The periodic jobs (retention housekeeping every minute, the compaction threshold check)
    # re-armed themselves inside the advance, so ten years fired ~10 million callbacks in one
    # loop turn (about 30 s of stall on an idle machine; the HTTP call timed out).
    b: BrokerProcess = broker_factory(args=MANUAL)
    start = call(b.admin_url, "GET", CLOCK)[1]["nowMs"]
    worst: list[float] = []
    stop = threading.Event()

    def probe() -> None:  # another client's tiny requests while the advance runs
        while not stop.is_set():
            t0 = time.monotonic()
            call(b.admin_url, "GET", CLOCK)
            worst.append(time.monotonic() - t0)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t0 = time.monotonic()
    status, body = call(b.admin_url, "POST", f"{CLOCK}/advance?ms={MAX_ADVANCE_MS}")
    took = time.monotonic() - t0
    stop.set()
    t.join(15)
    assert status == 200, body
    assert body["nowMs"] == start + MAX_ADVANCE_MS
    assert took < 5.0, f"a ten-year advance took {took:.1f} s"
    assert body["timersFired"] < 100, body  # each periodic job once, not once per period
    assert max(worst) < 5.0, f"another request waited {max(worst):.1f} s"
    # and the clock still works: a small advance after it moves by exactly that
    status, body = call(b.admin_url, "POST", f"{CLOCK}/advance?ms=1000")
    assert status == 200 and body["nowMs"] == start + MAX_ADVANCE_MS + 1000, body
