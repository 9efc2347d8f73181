"""The two brokers for the differential scenarios, started once per run.

`reference`: Apache Pulsar standalone from conformance/reference.py (or, when
LETTERBOX_REFERENCE_URLS="pulsar://host:port http://host:port" is set, one already running, as
`make pulsar` leaves it). `letterbox_target`: a letterbox standalone on free ports with a
temporary data directory, in its default mode (extensions on: the records say where that
differs from Pulsar). The results file is started afresh at the beginning of a run."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.reference import PulsarReference
from tests.conformance.compare import RESULTS
from tests.conformance.targets import Target
from tests.conftest import REPLAY_WINDOW, BrokerProcess


def pytest_sessionstart(session: pytest.Session) -> None:
    RESULTS.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def reference() -> Iterator[Target]:
    given = os.environ.get("LETTERBOX_REFERENCE_URLS", "").split()
    if given:
        yield Target("pulsar", given[0], given[1])
        return
    with PulsarReference() as ref:
        yield Target("pulsar", ref.service_url, ref.admin_url)


@pytest.fixture(scope="session")
def letterbox_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # the product's defaults, the replay window of acknowledged entries included
    b = BrokerProcess(Path(tmp_path_factory.mktemp("letterbox")) / "data", env=REPLAY_WINDOW).start()
    yield Target("letterbox", b.url, b.admin_url)
    b.stop()


@pytest.fixture(scope="session")
def targets(reference: Target, letterbox_target: Target) -> tuple[Target, Target]:
    return reference, letterbox_target
