"""ConnectionGuard's connection limiter without sockets: it counts connections per IP and
in total. (Publish backpressure moved to flow_control.py: tests/unit/test_flow_control.py.)"""
from __future__ import annotations

from letterbox.broker.connection.connection_guard import ConnectionLimiter
from letterbox.config import BrokerConfig


def test_limiter_counts_per_ip_and_in_total() -> None:
    limiter = ConnectionLimiter(BrokerConfig(broker_max_connections=3, broker_max_connections_per_ip=2))
    assert limiter.admit("a") is None and limiter.admit("a") is None
    assert "brokerMaxConnectionsPerIp (2)" in (limiter.admit("a") or "")
    assert limiter.admit("b") is None
    assert "brokerMaxConnections (3)" in (limiter.admit("c") or "")
    limiter.release("a")
    assert limiter.admit("c") is None
    assert limiter.per_ip == {"a": 1, "b": 1, "c": 1}
