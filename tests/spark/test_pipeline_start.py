"""Pipeline.start() starts a query again when Spark's driver-side Python worker for the
source did not connect back in Spark's fixed 10 s (seen on a loaded machine: the query died
before reading anything); any other failure is the caller's to see. Fake queries: this is
about the decision, not about Spark."""
from __future__ import annotations

import logging
from typing import Any

import pytest

from letterbox.spark.pipeline import Pipeline

CONNECT_BACK = ("[STREAM_FAILED] Query terminated with exception: Python worker failed to connect back. "
                "Caused by: Timed out while waiting for the Python worker to connect back")


class FakeQuery:
    def __init__(self, failure: str | None, polls_initializing: int = 3) -> None:
        self.failure, self.polls = failure, polls_initializing

    @property
    def isActive(self) -> bool:
        return self.failure is None or self.polls > 0

    @property
    def status(self) -> dict[str, Any]:
        self.polls -= 1
        return {"message": "Initializing sources" if self.polls >= 0 else "Waiting for data to arrive"}

    def exception(self) -> str | None:
        return self.failure


class Chain:
    """source().writeStream.queryName(...)...start() handing out the next fake query."""

    def __init__(self, queries: list[FakeQuery]) -> None:
        self.queries, self.started = queries, 0

    def __getattr__(self, name: str) -> Any:
        return self if name == "writeStream" else (lambda *a, **k: self)

    def start(self) -> FakeQuery:
        self.started += 1
        return self.queries.pop(0)


def _pipeline(monkeypatch: pytest.MonkeyPatch, chain: Chain) -> Pipeline:
    p = Pipeline(spark=object(), service_url="pulsar://127.0.0.1:1", topic="t", subscription="s",
                 handler=lambda r: r.value, sink="/nonexistent", checkpoint="/nonexistent")
    monkeypatch.setattr(p, "source", lambda: chain)
    return p


def test_a_query_whose_worker_did_not_connect_back_is_started_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    running = FakeQuery(None)
    chain = Chain([FakeQuery(CONNECT_BACK), running])
    with caplog.at_level(logging.WARNING, "letterbox.spark"):
        assert _pipeline(monkeypatch, chain).start() is running
    assert chain.started == 2
    assert "did not connect back" in caplog.text and "attempt 1 of 3" in caplog.text


def test_it_gives_up_after_three_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = Chain([FakeQuery(CONNECT_BACK) for _ in range(3)])
    last = chain.queries[-1]
    assert _pipeline(monkeypatch, chain).start() is last  # the caller sees its failure
    assert chain.started == 3


def test_any_other_failure_is_returned_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = FakeQuery("topic persistent://public/default/t does not exist")
    chain = Chain([broken, FakeQuery(None)])
    assert _pipeline(monkeypatch, chain).start() is broken
    assert chain.started == 1
