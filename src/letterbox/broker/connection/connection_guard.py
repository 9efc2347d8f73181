# Bounds on what one client connection may hold of the broker, in one place
# beside ServerCnx:
#   * admission: brokerMaxConnections / brokerMaxConnectionsPerIp (0: no
#     limit); a connection over a limit is closed at accept, before a byte is
#     read (as Pulsar does);
#   * time limits: CONNECT must arrive within connect_timeout_seconds of the
#     accept, and a frame once started must be complete within
#     frame_timeout_seconds (a slowloris connection is closed, its buffer freed);
#   * a connection not being read (paused by backpressure) is looked at every
#     PAUSED_PEEK_SECONDS: if its peer has gone (hang-up or error on the socket, which a
#     paused transport does not notice), it is closed at once, so what it held is given
#     back in about a second rather than at the frame or keep-alive timeout.
# Publish backpressure (pausing reads) is flow_control.py's.
# Invariant: a closed guard has released its connection count and its timers.
from __future__ import annotations

import asyncio
import logging
import select
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig

log = logging.getLogger("letterbox.cnx")
PAUSED_PEEK_SECONDS = 1.0
_GONE = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)


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


class Guarded(Protocol):
    """What the guard sees of its connection (server_cnx.ServerCnx)."""

    remote: str
    closed: bool

    transport: asyncio.Transport | None

    @property
    def connected(self) -> bool: ...  # CONNECT arrived

    def close(self) -> None: ...


class ConnectionGuard:
    def __init__(self, cnx: Guarded, limiter: ConnectionLimiter, config: BrokerConfig) -> None:
        self.cnx = cnx
        self.limiter = limiter
        self.connect_timeout = config.connect_timeout_seconds
        self.frame_timeout = config.frame_timeout_seconds
        self.ip: str | None = None
        self.closed = False
        self._buffered = 0
        self._loop = asyncio.get_running_loop()
        self._frame_timer: asyncio.TimerHandle | None = None
        self._connect_timer: asyncio.TimerHandle | None = None
        self._peek_timer: asyncio.TimerHandle | None = None

    # --- admission and time limits -------------------------------------------
    def admit(self, ip: str) -> bool:
        """Count the connection in; False (and a log line) when a limit refuses it."""
        reason = self.limiter.admit(ip)
        if reason is not None:
            self.closed = True
            log.warning("refusing connection from %s: %s", self.cnx.remote, reason)
            return False
        self.ip = ip
        self._connect_timer = self._loop.call_later(self.connect_timeout, self._connect_timed_out)
        return True

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if not self.closed and not self.cnx.closed and not self.cnx.connected:
            log.warning("closing connection from %s: no CONNECT within %.1fs", self.cnx.remote, self.connect_timeout)
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
        self._buffered = buffered

    def _frame_timed_out(self) -> None:
        self._frame_timer = None
        if not self.closed and not self.cnx.closed:
            log.warning("closing connection from %s: a frame stayed incomplete for %.1fs (%d bytes buffered)",
                        self.cnx.remote, self.frame_timeout, self._buffered)
            self.cnx.close()

    def reading_paused(self, paused: bool) -> None:
        """The transport stopped (True) or resumed (False) reading."""
        if paused and self._peek_timer is None and not self.closed:
            self._peek_timer = self._loop.call_later(PAUSED_PEEK_SECONDS, self._peek)
        elif not paused and self._peek_timer is not None:
            self._peek_timer.cancel()
            self._peek_timer = None

    def _peek(self) -> None:
        self._peek_timer = None
        if self.closed or self.cnx.closed:
            return
        sock = self.cnx.transport.get_extra_info("socket") if self.cnx.transport is not None else None
        if sock is not None and peer_gone(sock.fileno()):
            log.info("closing connection from %s: the peer went away while it was not being read", self.cnx.remote)
            self.cnx.close()
            return
        self._peek_timer = self._loop.call_later(PAUSED_PEEK_SECONDS, self._peek)

    # --- end -------------------------------------------------------------------
    def close(self) -> None:
        """The connection is gone: give back its count, stop its timers."""
        if self.closed:
            return
        self.closed = True
        for timer in (self._frame_timer, self._connect_timer, self._peek_timer):
            if timer is not None:
                timer.cancel()
        if self.ip is not None:
            self.limiter.release(self.ip)


def peer_gone(fd: int) -> bool:
    """Whether the socket's peer hung up or the socket is in error (without reading it)."""
    poll = select.poll()
    poll.register(fd, _GONE)
    return any(events & _GONE for _, events in poll.poll(0))
