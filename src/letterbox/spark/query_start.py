# Starting a streaming query that reads the `letterbox` source. Spark runs the
# source's driver-side part in a Python worker it starts for the query and
# waits a fixed 10 s (not configurable) for that worker to connect back. On a
# loaded driver machine the worker's imports (from pyspark.zip, compiled anew
# every time) can take longer, and the query dies while "Initializing
# sources", before it has read anything or written its checkpoint further.
# `start_query` starts such a query again, up to START_ATTEMPTS times in all;
# any other failure, or a query still initializing after the wait, is handed
# back to the caller as it is.
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("letterbox.spark")

START_ATTEMPTS = 3
# what Spark says when a Python worker it started did not connect back in time
WORKER_CONNECT_BACK = ("Python worker failed to connect back", "waiting for the Python worker to connect back")
_INITIALIZING = "Initializing"  # "Initializing StreamExecution", then "Initializing sources"


def start_query(start: Callable[[], Any], name: str) -> Any:
    """`start()` returns a started StreamingQuery; returns it once its sources are set up."""
    attempt = 1
    while True:
        query = start()
        failure = start_failure(query)
        if failure is None or attempt >= START_ATTEMPTS or not any(t in failure for t in WORKER_CONNECT_BACK):
            return query
        log.warning("query %s: its Python worker did not connect back in Spark's 10 s (attempt %d of %d); "
                    "starting it again from its checkpoint", name, attempt, START_ATTEMPTS)
        attempt += 1


def start_failure(query: Any, timeout_s: float = 120.0) -> str | None:
    """The error of a query that died while setting up its sources, else None (it is running,
    or still setting up after timeout_s: then it is left to run)."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and str(query.status.get("message", "")).startswith(_INITIALIZING) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    if query.isActive:
        return None
    failure = query.exception()
    return None if failure is None else str(failure)
