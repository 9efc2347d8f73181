"""A large dead letter topic never stalls the broker: the whole-DLQ scans (summary, the
redrive's dry-run count and its up-front checks, the task's final counts, a purge's
count) give the event loop back as they go (dead_letters.SLICE_SECONDS). Measured with
a loop-lag probe: another client's tiny admin requests, back to back, while they run."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.admin.redrive_helpers import P, T, backlog
from tests.conftest import BrokerProcess, wait_until

N = 30_000
TOPIC = "stall"
DLQ = f"{TOPIC}-S1-DLQ"


class Probe:
    """Back-to-back GETs of a cheap admin route from a thread: (sent, answered) times."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.requests: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                long_call(self.base, "GET", "/admin/v2/letterbox/clock")
            finally:  # even a request that failed waited this long
                self.requests.append((t0, time.monotonic()))

    def worst(self, start: float, end: float) -> float:
        """The longest wait of a request that was waiting at some time in [start, end]."""
        deadline = time.monotonic() + 120
        while not any(a > end for a, _b in self.requests) and time.monotonic() < deadline:
            time.sleep(0.01)  # the request caught in the phase's end answers first
        return max((b - a for a, b in list(self.requests) if b >= start and a <= end), default=0.0)

    def __enter__(self) -> Probe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


@pytest.fixture(scope="module")
def dlq(broker: BrokerProcess) -> Iterator[str]:
    """N dead letters of S1 in stall-S1-DLQ (with a broker move's stamps), unbatched."""
    base = broker.admin_url
    assert call(base, "PUT", f"{P}/{TOPIC}")[0] == 204
    assert call(base, "PUT", f"{P}/{TOPIC}/subscription/S1", '"earliest"')[0] == 204
    client = pulsar.Client(broker.url, operation_timeout_seconds=60)
    producer = client.create_producer(T + DLQ, batching_enabled=False, max_pending_messages=2000,
                                      block_if_queue_full=True)
    results: list[Any] = []
    for i in range(N):
        producer.send_async(f"m{i}".encode(), lambda res, _mid: results.append(res), properties={
            "REAL_TOPIC": T + TOPIC, "ORIGIN_MESSAGE_ID": f"1:{i}:-1:-1", "DEAD_LETTER_REASON": "expired",
            "DEAD_LETTER_SUBSCRIPTION": "S1", "DEAD_LETTER_TIME": str(int(time.time() * 1000))})
    producer.flush()
    assert wait_until(lambda: len(results) >= N, timeout=120, interval=0.05)
    assert len(results) == N and all(r == pulsar.Result.Ok for r in results)
    client.close()
    yield DLQ


def long_call(base: str, method: str, path: str, body: Any = None) -> Any:
    """An admin call that may take minutes on a loaded machine (call's default gives up at 10 s)."""
    status, answer = call(base, method, path, None if body is None else json.dumps(body), timeout=600)
    assert status == 200, answer
    return answer


def timed(probe: Probe, base: str, method: str, path: str, body: Any = None) -> tuple[Any, float, float]:
    t0 = time.monotonic()
    answer = long_call(base, method, path, body)
    t1 = time.monotonic()
    return answer, t1 - t0, probe.worst(t0, t1)


def test_counting_scans_of_a_large_dlq_give_the_loop_back(broker: BrokerProcess, dlq: str) -> None:
    # before: each scan ran in one loop turn, so the probe's worst wait WAS the scan's time
    base = broker.admin_url
    with Probe(base) as probe:
        for method, path, body in [
            ("POST", f"{P}/{dlq}/letterbox/redrive", {"dryRun": True, "subscriptionOnly": True}),
            ("POST", f"{P}/{dlq}/letterbox/redrive", {"dryRun": True}),
            ("GET", "/admin/v2/namespaces/public/default/letterbox/deadLetterTopics", None),
            ("POST", f"{P}/{dlq}/letterbox/purge", {"dryRun": True, "reason": "expired"}),
        ]:
            answer, took, worst = timed(probe, base, method, path, body)
            assert json.dumps(answer).count(str(N)) >= 1, answer  # it did count all N
            assert worst < 0.3 * took, f"{path} {body}: took {took:.2f} s, another request waited {worst:.2f} s"


def test_a_redrive_of_a_large_dlq_never_stalls_the_broker(broker: BrokerProcess, dlq: str) -> None:
    # before: the in-request redrive's up-front checks and final counts (four whole-DLQ scans
    # in single loop turns) held every other client for seconds
    base = broker.admin_url
    with Probe(base) as probe:
        answer, took, worst = timed(probe, base, "POST", f"{P}/{dlq}/letterbox/redrive", {"subscriptionOnly": True})
    assert answer == {"matched": N, "moved": N, "remaining": 0, "dryRun": False}, answer
    assert backlog(base, TOPIC, "S1") == N
    # before: 2.9 s of a 6.6 s redrive (idle machine); after: well under 5 % of it
    assert worst < 0.2 * took, f"a redrive of {N} took {took:.1f} s and another request waited {worst:.2f} s"
