"""Fixtures shared by the raw-socket broker tests."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[RawConn]:
    """A raw connection to the module's broker, past CONNECT/CONNECTED."""
    c = RawConn(broker.port)
    c.handshake()
    yield c
    c.close()
