# ServerCnx: one per client connection, a thin asyncio adapter over the sans-IO
# ServerProtocol. It owns the connection's state (handshake, producers, consumers, input
# held or paused) and its one outbound path: every frame to the client goes through `send`,
# which checks it (OutboundError) and buffers it; flushed once per loop pass, at FLUSH_BYTES,
# or after a commit's receipts, so a burst of receipts or messages costs one socket write.
# Frames received are handed to their handlers by inbound.py; a client error becomes an
# ERROR / SEND_ERROR frame with a Pulsar code, a protocol violation closes this connection.
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from letterbox.broker.connection import heap_trim
from letterbox.broker.connection.answer_chain import answer, take_place
from letterbox.broker.connection.connection_guard import ConnectionGuard
from letterbox.broker.connection.flow_control import FlowControl
from letterbox.errors import LetterboxError, ServerError
from letterbox.protocol import FRAME_PADDING, ProtocolError, ServerProtocol, commands, pb
from letterbox.protocol.request_ids import request_id_of
from letterbox.protocol.speedups import send_codec
from letterbox.security.tls import peer_common_name

if TYPE_CHECKING:
    from letterbox.broker.connection.connection_broker import ConnectionBroker
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.producer import Producer, ProducerTopic
    from letterbox.security.authentication import Session

log = logging.getLogger("letterbox.cnx")
KEEPALIVE_SECONDS = 30.0
# output buffered past this is written at once rather than at the end of the loop pass, so
# the transport's pause_writing stops dispatch before a round builds all of a consumer's
# permits' worth of (large) messages in memory
FLUSH_BYTES = 1024 * 1024
T = pb.BaseCommand
_SEND_RUNS = send_codec is not None  # ServerProtocol.take_sends can give anything


class ServerCnx(asyncio.Protocol):
    def __init__(self, service: ConnectionBroker, inbound: Callable[[ServerCnx], None], tls: bool = False) -> None:
        self.service = service
        self._inbound = inbound  # reads the frames received so far and hands them out (inbound.py)
        self.tls = tls  # accepted on the pulsar+ssl:// listener
        # who the client is (None: authentication off); set before CONNECTED is sent
        self.role: str | None = None
        self.session: Session | None = None
        self.peer_common_name: str | None = None  # CN of a verified client certificate
        self.supports_auth_refresh = False
        self.client_version = ""  # CONNECT's client_version (end_of_topic.py reads it)
        self.challenge_sent_at: float | None = None  # an AUTH_CHALLENGE awaits its answer
        self.refresh_timer: asyncio.TimerHandle | None = None
        self.refusal_timer: asyncio.TimerHandle | None = None
        self.input_held = False  # no frame is handled until release_input()
        self._reading = True  # the transport's reading state (hold_input and flow control)
        # why this connection's credentials were refused (every request now gets it)
        self.refusal: str | None = None
        self.proto = ServerProtocol(max_frame_size=service.config.max_message_size + FRAME_PADDING)
        self.transport: asyncio.Transport | None = None
        self.producers: dict[int, Producer] = {}
        self.closed_producers: set[int] = set()  # closed by the broker: SENDs crossing it are dropped
        self.consumers: dict[int, Consumer] = {}
        self.pending_producers: dict[int, asyncio.Future[None]] = {}
        # per topic, the producers whose reserved SENDs wait to be submitted together (send_batch.py)
        self.send_batches: dict[ProducerTopic, list[Producer]] = {}
        self.writable = True
        self.closed = False
        self.remote = "?"
        self.protocol_version = 0
        self._handshaken = False  # CONNECTED went out (send() checks the handshake until then)
        self._frame_limit = service.config.max_message_size + FRAME_PADDING  # what the client reads
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self._last_seen = time.monotonic()
        self._keepalive: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        # connection limits, CONNECT/frame time limits (connection_guard.py)
        self.guard = ConnectionGuard(self, service.connection_limiter, service.config)
        # publish backpressure: pending SENDs and bytes awaiting storage (flow_control.py)
        self.flow = FlowControl(self, service.publish_buffer, service.config)

    # --- transport callbacks ---------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tr = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.transport = tr
        peer = tr.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if peer else "?"
        if not self.guard.admit(str(peer[0]) if peer else "?"):
            self.closed = True
            tr.abort()
            return
        if self.tls:
            self.peer_common_name = peer_common_name(tr)
        tr.set_write_buffer_limits(high=4 * 1024 * 1024, low=1024 * 1024)
        self.service.connections.add(self)
        self._keepalive = self._loop.call_later(KEEPALIVE_SECONDS, self._check_alive)

    def data_received(self, data: bytes) -> None:
        self._last_seen = time.monotonic()
        try:
            self.proto.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.remote, exc)
            self.close()
            return
        self._inbound(self)

    @property
    def connected(self) -> bool:
        """CONNECT arrived (the sans-IO protocol's state)."""
        return self.proto.connected

    def hold_input(self) -> None:
        """Handle no further frame until release_input() (authentication in progress)."""
        self.input_held = True
        self.update_reading()

    def release_input(self) -> None:
        self.input_held = False
        if self.transport is not None and not self.closed:
            self.update_reading()
            self._inbound(self)

    def update_reading(self) -> None:
        """Read from the socket unless input is held or flow control says stop."""
        reading = not (self.input_held or self.flow.paused)
        if reading != self._reading and self.transport is not None and not self.closed:
            self._reading = reading
            (self.transport.resume_reading if reading else self.transport.pause_reading)()
            self.guard.reading_paused(not reading)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.guard.close()
        heap_trim.after_free(max(self.flow.held, self.proto.buffered))
        self.flow.close()
        self.proto.release()  # an unfinished frame's bytes go now, not when the cycle is collected
        for timer in (self._keepalive, self.refresh_timer, self.refusal_timer):
            if timer is not None:
                timer.cancel()
        self.service.connections.discard(self)
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            self.service.detach_consumer(consumer)
        self.consumers.clear()

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        for consumer in self.consumers.values():
            if consumer.subscription is not None:
                consumer.subscription.schedule_dispatch()

    # --- output: the one path of every frame to the client ----------------
    def send(self, frames: bytes, *, consumer_id: int | None = None, producer_id: int | None = None,
             count: int = 1) -> None:
        """Queue `frames` for the client: one command frame, or `count` frames built together
        (a run of MESSAGEs for one consumer, a producer's receipts); flushed once per loop
        pass or at FLUSH_BYTES. Checked here, each in O(1) and without a copy: the
        connection's state allows the command (nothing once closed; only the handshake's
        commands until CONNECTED went out), the consumer (`consumer_id`) or producer
        (`producer_id`) a broker-initiated command names is one of this connection's, and the
        bytes stay within what the client reads (max_message_size + FRAME_PADDING a frame).
        A frame that fails a check raises OutboundError and is not sent."""
        if self.closed:
            return
        if not self._handshaken:
            self._check_handshake(frames)
        if consumer_id is not None and consumer_id not in self.consumers:
            raise OutboundError(f"{_kind(frames)} for consumer {consumer_id}, not one of this connection's")
        if producer_id is not None and producer_id not in self.producers:
            raise OutboundError(f"{_kind(frames)} for producer {producer_id}, not one of this connection's")
        n = len(frames)
        if n > self._frame_limit * count:
            raise OutboundError(f"{_kind(frames)} of {n} bytes in {count} frame(s): over the client's frame limit")
        self._out.append(frames)
        self._out_bytes += n
        if self._out_bytes >= FLUSH_BYTES:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def _check_handshake(self, frame: bytes) -> None:
        """Before CONNECTED went out: only the handshake's commands; CONNECTED ends it."""
        kind = frame[_TYPE_AT] if len(frame) > _TYPE_AT and frame[_TYPE_AT - 1] == _TYPE_TAG else None
        if kind not in _HANDSHAKE:
            raise OutboundError(f"{_kind(frame)} before CONNECTED")
        if kind == T.CONNECTED:
            self._handshaken = True

    def close_producer(self, producer_id: int) -> None:
        """Tell the client to close one of its producers (CLOSE_PRODUCER) and forget it at once
        (SENDs that cross the frame are dropped, as Pulsar does: the client sends them again
        once it has the producer back). The frame takes its place in the producer's answer
        chain: it leaves after the receipts of the SENDs already stored or being stored, which
        the client would otherwise find no producer for, and fail though they were kept."""
        producer = self.producers.pop(producer_id, None)
        if producer is None:
            raise OutboundError(f"CLOSE_PRODUCER for producer {producer_id}, not one of this connection's")
        self.closed_producers.add(producer_id)
        answer(take_place(producer), functools.partial(self.send, commands.close_producer(producer_id)))

    def close_consumer(self, consumer_id: int) -> None:
        """Tell the client to close one of its consumers (CLOSE_CONSUMER) and forget it."""
        self.send(commands.close_consumer(consumer_id), consumer_id=consumer_id)
        self.consumers.pop(consumer_id, None)

    def flush(self) -> None:
        """The tail of send(): the one write to the transport (at the end of a loop pass, or at
        once where a caller has written all it will for now)."""
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.closed:
            out, self._out, self._out_bytes = self._out, [], 0
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def spawn(self, coro: Coroutine[Any, Any, None], request_id: int) -> None:
        """Run an async request handler; its LetterboxError becomes an ERROR reply."""
        task = asyncio.ensure_future(coro)
        self.service.track(task)

        def report(t: asyncio.Future[None]) -> None:
            if t.cancelled():
                return
            exc = t.exception()
            if isinstance(exc, LetterboxError):
                self.send(commands.error(request_id, exc.code, exc.message))
            elif exc is not None:
                log.error("request %s from %s failed: %r", request_id, self.remote, exc)
                self.send(commands.error(request_id, ServerError.UnknownError, f"internal error: {exc}"))

        task.add_done_callback(report)

    def _check_alive(self) -> None:
        if self.closed:
            return
        idle = time.monotonic() - self._last_seen
        if idle > 2 * KEEPALIVE_SECONDS:
            log.info("closing idle connection from %s (no traffic for %.0fs)", self.remote, idle)
            self.close()
            return
        if self.proto.connected:
            self.send(commands.ping())
        self._keepalive = self._loop.call_later(KEEPALIVE_SECONDS, self._check_alive)

    # --- replies --------------------------------------------------------
    def reply_error(self, cmd: pb.BaseCommand, code: int, message: str) -> None:
        rid = request_id_of(cmd)
        if cmd.type == T.SEND:
            self.send(commands.send_error(cmd.send.producer_id, cmd.send.sequence_id, code, message))
        elif cmd.type == T.ACK and cmd.ack.HasField("request_id"):
            self.send(commands.ack_response(cmd.ack.consumer_id, cmd.ack.request_id, code, message))
        elif cmd.type == T.LOOKUP:
            self.send(commands.lookup_error(rid or 0, code, message))
        elif cmd.type == T.PARTITIONED_METADATA:
            self.send(commands.partitioned_metadata_error(rid or 0, code, message))
        elif cmd.type == T.GET_SCHEMA:
            self.send(commands.get_schema_error(rid or 0, code, message))
        elif cmd.type == T.GET_OR_CREATE_SCHEMA:
            self.send(commands.get_or_create_schema_error(rid or 0, code, message))
        elif rid is not None:
            self.send(commands.error(rid, code, message))
        else:
            log.info("%s from %s failed: %s", T.Type.Name(cmd.type), self.remote, message)

    def advertised_urls(self) -> tuple[str, str | None]:
        """pulsar:// and pulsar+ssl:// URLs of this broker (None where that listener is off)."""
        cfg = self.service.config
        if cfg.advertised_address:
            host = cfg.advertised_address
        else:
            sock = self.transport.get_extra_info("sockname") if self.transport else None
            host = sock[0] if sock else "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        port, tls_port = self.service.port, self.service.tls_port
        tls_url = f"pulsar+ssl://{host}:{tls_port}" if tls_port else None
        # with the plain listener off, a plain URL would point nowhere: give the TLS one
        plain = f"pulsar://{host}:{port}" if port else (tls_url or "")
        return plain, tls_url


class OutboundError(Exception):
    """A frame the connection must not send (h11's LocalProtocolError): the broker's bug, not
    the client's."""


# A frame is [total size][command size][BaseCommand]; the command's first field is its type
# (field 1, a varint: tag 0x08), so the type of the (first) frame is read without parsing.
_TYPE_TAG = 0x08
_TYPE_AT = 9
_HANDSHAKE = frozenset({T.CONNECTED, T.AUTH_CHALLENGE, T.ERROR, T.PING, T.PONG})


def _kind(frames: bytes) -> str:
    """The command name of the (first) frame in `frames`, for an OutboundError."""
    known = len(frames) > _TYPE_AT and frames[_TYPE_AT - 1] == _TYPE_TAG and frames[_TYPE_AT] in T.Type.values()
    return T.Type.Name(cast(Any, frames[_TYPE_AT])) if known else "a frame"
