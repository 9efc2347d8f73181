# Bounds on what one client connection (and all of them together) may hold
# of the broker, in one place beside ServerCnx:
#   * admission: brokerMaxConnections / brokerMaxConnectionsPerIp (0: no
#     limit); a connection over a limit is closed at accept, before a byte is
#     read (as Pulsar does);
#   * time limits: CONNECT must arrive within connect_timeout_seconds of the
#     accept, and a frame once started must be complete within
#     frame_timeout_seconds (a slowloris connection is closed, its buffer freed);
#   * backpressure (Pulsar's ServerCnx throttling, uvicorn's flow_control.py):
#     reading pauses while the connection's SENDs not yet receipted exceed
#     maxPendingPublishRequestsPerConnection or max_pending_bytes_per_connection,
#     or while all connections' pending SEND bytes plus unfinished frames exceed
#     maxMessagePublishBufferSizeInMB; it resumes once back under half.
# Invariants: PublishBuffer.total is the sum of every open guard's `_pending_bytes`
# and `_buffered`; a closed guard has given all of its bytes back; while
# `paused`, ServerCnx.update_reading keeps the transport from reading.
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from letterbox.broker.server_cnx import ServerCnx
    from letterbox.config import BrokerConfig

log = logging.getLogger("letterbox.cnx")
MB = 1024 * 1024


class ConnectionLimiter:
    """Open connections in total and per remote IP (one per broker)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.max_total = config.broker_max_connections
        self.max_per_ip = config.broker_max_connections_per_ip
        self.total = 0
        self.per_ip: dict[str, int] = {}

    def admit(self, ip: str) -> str | None:
        """Count a new connection from `ip`, or say why it is refused."""
        if self.max_total > 0 and self.total >= self.max_total:
            return f"the broker has reached brokerMaxConnections ({self.max_total})"
        count = self.per_ip.get(ip, 0)
        if self.max_per_ip > 0 and count >= self.max_per_ip:
            return f"{ip} has reached brokerMaxConnectionsPerIp ({self.max_per_ip})"
        self.total += 1
        self.per_ip[ip] = count + 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        left = self.per_ip.get(ip, 1) - 1
        if left > 0:
            self.per_ip[ip] = left
        else:
            self.per_ip.pop(ip, None)


class PublishBuffer:
    """Bytes held for all connections: SENDs not yet receipted and unfinished frames."""

    def __init__(self, config: BrokerConfig) -> None:
        mb = config.max_message_publish_buffer_size_in_mb
        self.limit = mb * MB if mb > 0 else 0
        self.total = 0
        self.paused: set[ConnectionGuard] = set()

    @property
    def over(self) -> bool:
        return self.limit > 0 and self.total > self.limit

    def change(self, delta: int) -> None:
        self.total += delta
        if delta < 0 and self.paused and self.total <= self.limit // 2:
            for guard in list(self.paused):
                guard.update()


class ConnectionGuard:
    def __init__(self, cnx: ServerCnx) -> None:
        self.cnx = cnx
        service = cnx.service
        cfg = service.config
        self.limiter: ConnectionLimiter = service.connection_limiter
        self.shared: PublishBuffer = service.publish_buffer
        self.max_requests = cfg.max_pending_publish_requests_per_connection
        # never below one frame of the maximum size, or that frame could not be read
        self.max_bytes = max(cfg.max_pending_bytes_per_connection, 2 * (cfg.max_message_size + 10 * 1024))
        self.frame_timeout = cfg.frame_timeout_seconds
        self.ip: str | None = None
        self.paused = False
        self.closed = False
        self._pending_requests = 0
        self._pending_bytes = 0
        self._buffered = 0
        self._loop = asyncio.get_running_loop()
        self._frame_timer: asyncio.TimerHandle | None = None
        self._connect_timer: asyncio.TimerHandle | None = None

    # --- admission and time limits -------------------------------------------
    def admit(self, ip: str) -> bool:
        """Count the connection in; False (and a log line) when a limit refuses it."""
        reason = self.limiter.admit(ip)
        if reason is not None:
            self.closed = True
            log.warning("refusing connection from %s: %s", self.cnx.remote, reason)
            return False
        self.ip = ip
        self._connect_timer = self._loop.call_later(
            self.cnx.service.config.connect_timeout_seconds, self._connect_timed_out
        )
        return True

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if not self.closed and not self.cnx.closed and not self.cnx.proto.connected:
            log.warning("closing connection from %s: no CONNECT within %.1fs",
                        self.cnx.remote, self.cnx.service.config.connect_timeout_seconds)
            self.cnx.close()

    def after_data(self, frames: int, buffered: int, timing: bool = True) -> None:
        """After a read: `frames` frames were completed, `buffered` bytes of the next
        one wait. The frame clock runs from the end of the last complete frame
        (not while `timing` is off: the connection holds its input itself)."""
        if self.closed:
            return
        if buffered and timing and (frames or self._frame_timer is None):
            if self._frame_timer is not None:
                self._frame_timer.cancel()
            self._frame_timer = self._loop.call_later(self.frame_timeout, self._frame_timed_out)
        elif (not buffered or not timing) and self._frame_timer is not None:
            self._frame_timer.cancel()
            self._frame_timer = None
        if buffered != self._buffered:
            delta, self._buffered = buffered - self._buffered, buffered
            self.shared.change(delta)
            self.update()

    def _frame_timed_out(self) -> None:
        self._frame_timer = None
        if not self.closed and not self.cnx.closed:
            log.warning("closing connection from %s: a frame stayed incomplete for %.1fs (%d bytes buffered)",
                        self.cnx.remote, self.frame_timeout, self._buffered)
            self.cnx.close()

    # --- backpressure ----------------------------------------------------------
    def publish_started(self, nbytes: int) -> None:
        self._pending_requests += 1
        self._pending_bytes += nbytes
        self.shared.change(nbytes)
        self.update()

    def publish_done(self, nbytes: int) -> None:
        if self.closed:
            return
        self._pending_requests -= 1
        self._pending_bytes -= nbytes
        self.shared.change(-nbytes)
        self.update()

    def _over(self) -> bool:
        return (
            (self.max_requests > 0 and self._pending_requests >= self.max_requests)
            or self._pending_bytes + self._buffered > self.max_bytes
            or self.shared.over
        )

    def _under_half(self) -> bool:
        limit = self.shared.limit
        return (
            (self.max_requests <= 0 or self._pending_requests <= self.max_requests // 2)
            and self._pending_bytes + self._buffered <= self.max_bytes // 2
            and (limit <= 0 or self.shared.total <= limit // 2)
        )

    def update(self) -> None:
        """Pause or resume reading from this connection after a count moved."""
        if self.closed:
            return
        if not self.paused and self._over():
            self.paused = True
            self.shared.paused.add(self)
            self.cnx.update_reading()
        elif self.paused and self._under_half():
            self.paused = False
            self.shared.paused.discard(self)
            self.cnx.update_reading()

    # --- end -------------------------------------------------------------------
    def close(self) -> None:
        """The connection is gone: give back its count and its bytes."""
        if self.closed:
            return
        self.closed = True
        for timer in (self._frame_timer, self._connect_timer):
            if timer is not None:
                timer.cancel()
        if self.ip is not None:
            self.limiter.release(self.ip)
        self.shared.paused.discard(self)
        self.shared.change(-(self._pending_bytes + self._buffered))
        self._pending_bytes = self._buffered = self._pending_requests = 0
