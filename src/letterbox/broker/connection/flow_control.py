# Publish backpressure (Pulsar's ServerCnx throttling; uvicorn's flow_control.py in spirit):
# the broker stops reading a producing connection instead of buffering what it cannot store
# yet. TCP then pushes back on the client, whose sends wait (nothing is refused or lost).
#   * per connection (FlowControl): reading pauses while the connection's SENDs not yet
#     receipted reach maxPendingPublishRequestsPerConnection, or their bytes plus the
#     unfinished frame in the decoder exceed max_pending_bytes_per_connection; it resumes
#     once both are back at half;
#   * over all connections (PublishBuffer), shared fairly: while the bytes awaiting storage
#     (every connection's unreceipted SENDs and unfinished frames) exceed
#     maxMessagePublishBufferSizeInMB, a connection that adds a SEND pauses only if it holds
#     more than its share (the limit divided by the connections holding bytes now), so a
#     client sending little is served while others flood or stall; a paused connection
#     resumes once it holds half its share or the total is back at half (one paused in the
#     middle of a frame: once the total is back under the limit). A connection in
#     the middle of a frame reads on until the frame is complete (else a frame larger than
#     what is left could never finish, and nothing would ever come back under the limit),
#     unless unfinished frames alone exceed the limit (many slow senders: the frame timeout
#     ends them); even then a connection whose unfinished frame is the largest when it reads
#     reads on, so that some frame always completes (and when one completes or is dropped,
#     the largest paused one is woken). Beyond the limit the buffer so grows by at most one
#     frame at a time.
# Invariants: PublishBuffer.total == the sum of `held` over open FlowControls,
# PublishBuffer.framing the sum of their `buffered`, PublishBuffer.holders the open
# FlowControls with `held` > 0; a closed FlowControl has given all of its bytes back and is
# not in `PublishBuffer.paused` nor `holders`; while `paused`, the connection's transport
# does not read (ServerCnx.update_reading). Counting is O(1) per SEND: a few integer
# updates, a set update, one comparison.
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig

MB = 1024 * 1024
FRAME_SLACK = 10 * 1024  # command + metadata around a maximum-size payload


class Reader(Protocol):
    """What flow control drives: the connection's reading state."""

    def update_reading(self) -> None: ...


class PublishBuffer:
    """Bytes awaiting storage over all connections (one per broker), with the counters
    /metrics reports."""

    def __init__(self, config: BrokerConfig) -> None:
        mb = config.max_message_publish_buffer_size_in_mb
        self.limit = mb * MB if mb > 0 else 0
        self.total = 0
        self.framing = 0  # the part of `total` that is unfinished frames
        self.paused: set[FlowControl] = set()
        self.holders: set[FlowControl] = set()  # connections holding bytes now
        self.pauses_total = 0  # times any connection stopped being read
        self.global_pauses_total = 0  # ... of them while the global limit was exceeded

    @property
    def over(self) -> bool:
        return self.limit > 0 and self.total > self.limit

    @property
    def share(self) -> int:
        """What one connection may hold while the total is over the limit."""
        return self.limit // max(1, len(self.holders))

    def leads(self, flow: FlowControl) -> bool:
        """`flow` has the largest unfinished frame of all connections (one of them when
        several are as large): it is not paused for unfinished frames."""
        return flow.buffered > 0 and flow is max(self.holders, key=_buffered, default=None)

    def frame_ended(self) -> None:
        """A frame completed or was dropped: the largest one paused may read on now."""
        waiting = [flow for flow in self.paused if flow.buffered > 0]
        if waiting:
            max(waiting, key=_buffered).update()

    def change(self, delta: int) -> None:
        self.total += delta
        if delta < 0 and self.paused and self.total <= self.limit:
            for flow in list(self.paused):
                flow.update()


class FlowControl:
    """One connection's publish backpressure."""

    def __init__(self, reader: Reader, shared: PublishBuffer, config: BrokerConfig) -> None:
        self.reader = reader
        self.shared = shared
        self.max_requests = config.max_pending_publish_requests_per_connection
        # never below two frames of the maximum size, or such a frame could not be read
        self.max_bytes = max(config.max_pending_bytes_per_connection, 2 * (config.max_message_size + FRAME_SLACK))
        self.paused = False
        self.closed = False
        self.pending_requests = 0
        self.pending_bytes = 0
        self.buffered = 0  # bytes of the frame the decoder has started but not finished
        self.pauses = 0
        self.resumes = 0

    def publish_started(self, nbytes: int, requests: int = 1) -> None:
        """`requests` SENDs of `nbytes` in all were accepted and are on their way to storage."""
        self.pending_requests += requests
        self.pending_bytes += nbytes
        self.shared.total += nbytes
        self._held_changed()
        if not self.paused and self._over(at_boundary=True):
            self._pause()

    def publish_done(self, nbytes: int, requests: int = 1) -> None:
        """Those SENDs were receipted (or failed): their bytes are no longer held."""
        if self.closed:
            return
        self.pending_requests -= requests
        self.pending_bytes -= nbytes
        self._held_changed()
        self.shared.change(-nbytes)
        if self.paused and self._under_half():
            self._resume()

    def set_buffered(self, nbytes: int) -> None:
        """After a read: `nbytes` of an unfinished frame wait in the decoder."""
        if self.closed or nbytes == self.buffered:
            return
        delta, self.buffered = nbytes - self.buffered, nbytes
        self.shared.framing += delta
        self._held_changed()
        self.shared.change(delta)
        self.update()
        if nbytes == 0 and self.shared.paused:
            self.shared.frame_ended()

    @property
    def held(self) -> int:
        """Bytes this connection holds of the broker: unreceipted SENDs and its unfinished frame."""
        return self.pending_bytes + self.buffered

    def _held_changed(self) -> None:
        if self.pending_bytes + self.buffered > 0:
            self.shared.holders.add(self)
        else:
            self.shared.holders.discard(self)

    def update(self) -> None:
        """Pause or resume reading after a count moved."""
        if self.closed:
            return
        if not self.paused and self._over(at_boundary=self.buffered == 0):
            self._pause()
        elif self.paused and self._under_half():
            self._resume()

    def _over(self, at_boundary: bool) -> bool:
        shared = self.shared
        return (
            (self.max_requests > 0 and self.pending_requests >= self.max_requests)
            or self.pending_bytes + self.buffered > self.max_bytes
            or (shared.over and self.held > shared.share
                and (at_boundary or (shared.framing > shared.limit and not shared.leads(self))))
        )

    def _under_half(self) -> bool:
        limit = self.shared.limit
        return (
            (self.max_requests <= 0 or self.pending_requests <= self.max_requests // 2)
            and self.pending_bytes + self.buffered <= self.max_bytes // 2
            and (limit <= 0 or self.shared.total <= limit // 2 or self.held <= self.shared.share // 2
                 or (self.buffered > 0 and (not self.shared.over or self.shared.leads(self))))
        )

    def _pause(self) -> None:
        self.paused = True
        self.pauses += 1
        self.shared.pauses_total += 1
        if self.shared.over:
            self.shared.global_pauses_total += 1
        self.shared.paused.add(self)
        self.reader.update_reading()

    def _resume(self) -> None:
        self.paused = False
        self.resumes += 1
        self.shared.paused.discard(self)
        self.reader.update_reading()

    def close(self) -> None:
        """The connection is gone: give back its bytes."""
        if self.closed:
            return
        self.closed = True
        self.shared.paused.discard(self)
        self.shared.holders.discard(self)
        self.shared.framing -= self.buffered
        self.shared.change(-(self.pending_bytes + self.buffered))
        unfinished = self.buffered
        self.pending_bytes = self.buffered = self.pending_requests = 0
        if unfinished and self.shared.paused:
            self.shared.frame_ended()


def _buffered(flow: FlowControl) -> int:
    return flow.buffered
