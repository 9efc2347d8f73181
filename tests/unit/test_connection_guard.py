"""ConnectionGuard without sockets: reading pauses when a connection's pending
SENDs or all connections' bytes pass their limits and resumes at half; the
limiter counts connections per IP and in total."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from letterbox.broker.connection_guard import ConnectionGuard, ConnectionLimiter, PublishBuffer
from letterbox.config import BrokerConfig

MB = 1024 * 1024


class FakeCnx:
    """What the guard sees of ServerCnx: reading follows guard.paused."""

    def __init__(self, service: Any, name: str) -> None:
        self.service = service
        self.remote = name
        self.closed = False
        self.reading = True
        self.guard = ConnectionGuard(self)  # type: ignore[arg-type]

    def update_reading(self) -> None:
        self.reading = not self.guard.paused


def guards(config: BrokerConfig, n: int) -> list[tuple[ConnectionGuard, FakeCnx]]:
    service = SimpleNamespace(config=config, connection_limiter=ConnectionLimiter(config),
                              publish_buffer=PublishBuffer(config))
    out = []
    for i in range(n):
        cnx = FakeCnx(service, f"peer-{i}")
        assert cnx.guard.admit("10.0.0.1")
        out.append((cnx.guard, cnx))
    return out


def test_pending_requests_pause_and_resume_at_half() -> None:
    async def main() -> None:
        [(guard, transport)] = guards(BrokerConfig(max_pending_publish_requests_per_connection=4), 1)
        for _ in range(3):
            guard.publish_started(100)
        assert transport.reading
        guard.publish_started(100)
        assert not transport.reading
        guard.publish_done(100)
        assert not transport.reading  # 3 pending: above half
        guard.publish_done(100)
        assert transport.reading  # 2 pending: half
        guard.close()
        assert guard.shared.total == 0 and guard.limiter.total == 0

    asyncio.run(main())


def test_shared_buffer_pauses_every_connection_that_adds_and_resumes_them_all() -> None:
    async def main() -> None:
        cfg = BrokerConfig(max_message_publish_buffer_size_in_mb=8, max_pending_bytes_per_connection=64 * MB)
        (a, ta), (b, tb) = guards(cfg, 2)
        a.publish_started(5 * MB)
        b.publish_started(4 * MB)  # 9 MB > 8 MB
        assert not tb.reading
        a.after_data(0, 1)  # a reads one more byte while the buffer is over
        assert not ta.reading
        b.publish_done(4 * MB)  # 5 MB + 1 byte: still above half
        assert not ta.reading and not tb.reading
        a.publish_done(5 * MB)
        assert ta.reading and tb.reading
        a.close()
        b.close()
        assert a.shared.total == 0

    asyncio.run(main())


def test_limiter_counts_per_ip_and_in_total() -> None:
    limiter = ConnectionLimiter(BrokerConfig(broker_max_connections=3, broker_max_connections_per_ip=2))
    assert limiter.admit("a") is None and limiter.admit("a") is None
    assert "brokerMaxConnectionsPerIp (2)" in (limiter.admit("a") or "")
    assert limiter.admit("b") is None
    assert "brokerMaxConnections (3)" in (limiter.admit("c") or "")
    limiter.release("a")
    assert limiter.admit("c") is None
    assert limiter.per_ip == {"a": 1, "b": 1, "c": 1}
