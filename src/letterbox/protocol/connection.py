# Server-side connection state, sans-IO (in the spirit of h11): bytes go in
# through receive_data(), frames come out of next_event() (and, once CONNECTED,
# runs of common SENDs out of take_sends()), and the only state kept is the
# decoder plus where we are in the handshake.
#
#   AWAITING_CONNECT --CONNECT--> CONNECTED --close()/error--> CLOSED
#
# Invariants: the first frame must be CONNECT and CONNECT appears only once;
# any ProtocolError except UnknownCommand moves to CLOSED, after which every
# call raises.
from __future__ import annotations

import enum

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    Frame,
    FrameDecoder,
    ProtocolError,
    SendScan,
    UnknownCommand,
)


class State(enum.Enum):
    AWAITING_CONNECT = "awaiting_connect"
    CONNECTED = "connected"
    CLOSED = "closed"


# (state, is_connect) -> next state; a missing pair is a protocol violation.
_TRANSITIONS: dict[tuple[State, bool], State] = {
    (State.AWAITING_CONNECT, True): State.CONNECTED,
    (State.CONNECTED, False): State.CONNECTED,
}


class ServerProtocol:
    __slots__ = ("_decoder", "state")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING) -> None:
        self._decoder = FrameDecoder(max_frame_size)
        self.state = State.AWAITING_CONNECT

    def receive_data(self, data: bytes) -> None:
        self._check_open()
        self._decoder.feed(data)

    def next_event(self) -> Frame | None:
        self._check_open()
        try:
            frame = self._decoder.next_frame()
        except UnknownCommand:
            if self.state is not State.CONNECTED:
                self.state = State.CLOSED
            raise
        except ProtocolError:
            self.state = State.CLOSED
            raise
        if frame is None:
            return None
        is_connect = frame.type == pb.BaseCommand.CONNECT
        if self.state is State.CONNECTED and not is_connect:  # the table's common row
            return frame
        nxt = _TRANSITIONS.get((self.state, is_connect))
        if nxt is None:
            prev = self.state
            self.state = State.CLOSED
            name = pb.BaseCommand.Type.Name(frame.type)
            raise ProtocolError(f"{name} not allowed in state {prev.value}")
        self.state = nxt
        return frame

    def take_sends(self) -> list[SendScan]:
        """Once CONNECTED: the run of common SEND frames next in the buffer, read by the
        compiled codec (FrameDecoder.take_sends); [] otherwise."""
        if self.state is not State.CONNECTED:
            return []
        return self._decoder.take_sends()

    @property
    def buffered(self) -> int:
        """Bytes received of a frame not yet complete."""
        return self._decoder.buffered

    @property
    def connected(self) -> bool:
        return self.state is State.CONNECTED

    def close(self) -> None:
        self.state = State.CLOSED

    def release(self) -> None:
        """Closed for good: the decoder's buffer is given back."""
        self.state = State.CLOSED
        self._decoder.release()

    def _check_open(self) -> None:
        if self.state is State.CLOSED:
            raise ProtocolError("connection is closed")
