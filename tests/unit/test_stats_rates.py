"""StatsTracker rates with sparse samples: the same one-minute-window rate as
sampling every counter every second, while idle topics cost no samples."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from letterbox.admin.stats import WINDOW_SECONDS, StatsTracker


def _tracker() -> tuple[StatsTracker, Any]:
    busy = SimpleNamespace(msg_in=0, bytes_in=0, producers=[SimpleNamespace(msg_in=0, bytes_in=0)])
    idle = SimpleNamespace(msg_in=7, bytes_in=70, producers=[])
    service = SimpleNamespace(topics={"busy": busy, "idle": idle})
    return StatsTracker(service), service  # type: ignore[arg-type]


def test_steady_rate_then_decay_after_the_producer_leaves() -> None:
    tracker, service = _tracker()
    busy = service.topics["busy"]
    for t in range(0, 121):  # 10 messages a second for two minutes
        busy.msg_in = 10 * t
        tracker.sample(float(t))
    assert abs(tracker.rate("in", "busy") - 10.0) < 1e-9
    busy.producers = []  # the producer leaves: the count stays at 1,200
    for t in range(121, 151):
        tracker.sample(float(t))
    # 30 s of the last 60 had traffic: (1200 - 900) / 60
    assert abs(tracker.rate("in", "busy") - 5.0) < 1e-9
    for t in range(151, 200):
        tracker.sample(float(t))
    assert tracker.rate("in", "busy") == 0.0


def test_idle_topics_keep_one_sample_and_rate_zero() -> None:
    tracker, service = _tracker()
    for t in range(0, int(WINDOW_SECONDS) * 3):
        tracker.sample(float(t))
    assert tracker.rate("in", "idle") == 0.0
    assert len(tracker._samples[("in", "idle")]) == 1  # not one per second
    service.topics["idle"].msg_in = 67  # 60 messages arrive in one second, then nothing
    tracker.sample(float(WINDOW_SECONDS * 3))
    assert abs(tracker.rate("in", "idle") - 1.0) < 1e-9  # 60 over the 60 s window
    del service.topics["idle"]
    tracker.sample(float(WINDOW_SECONDS * 3 + 1))
    assert ("in", "idle") not in tracker._samples
