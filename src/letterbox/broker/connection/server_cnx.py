# ServerCnx: one per client connection, a thin asyncio adapter over the
# sans-IO ServerProtocol. Bytes in -> frames -> `handle_<command>` methods;
# everything written is buffered and flushed once per event-loop pass, so a
# burst of receipts or messages costs one socket write. A client error
# becomes an ERROR / SEND_ERROR frame with a Pulsar code; a protocol
# violation closes this connection only. No handler may raise out of
# `data_received`.
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, cast

from letterbox.broker.connection import (
    handlers_auth,
    handlers_consumer,
    handlers_producer,
    handlers_topic,
    text_door,
)
from letterbox.broker.connection.connection_guard import ConnectionGuard
from letterbox.broker.connection.flow_control import FlowControl
from letterbox.broker.connection.handlers_producer import handle_sends
from letterbox.broker.connection.send_batch import submit as submit_sends
from letterbox.errors import LetterboxError, ServerError
from letterbox.protocol import FRAME_PADDING, ProtocolError, ServerProtocol, commands, pb
from letterbox.protocol.speedups import send_codec
from letterbox.security.tls import peer_common_name

if TYPE_CHECKING:
    from letterbox.broker.connection.connection_broker import ConnectionBroker
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.producer import Producer
    from letterbox.protocol import Frame
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
    def __init__(self, service: ConnectionBroker, tls: bool = False) -> None:
        self.service = service
        self.tls = tls  # accepted on the pulsar+ssl:// listener
        # who the client is (None: authentication off); set before CONNECTED is sent
        self.role: str | None = None
        self.session: Session | None = None
        self.peer_common_name: str | None = None  # CN of a verified client certificate
        self.supports_auth_refresh = False
        self.client_version = ""  # CONNECT's client_version (topic_termination.py reads it)
        self.challenge_sent_at: float | None = None  # an AUTH_CHALLENGE awaits its answer
        self.refresh_timer: asyncio.TimerHandle | None = None
        self.refusal_timer: asyncio.TimerHandle | None = None
        self._input_held = False
        self._reading = True  # the transport's reading state (hold_input and flow control)
        # why this connection's credentials were refused (every request now gets it)
        self.refusal: str | None = None
        self.proto = ServerProtocol(max_frame_size=service.config.max_message_size + FRAME_PADDING)
        self.transport: asyncio.Transport | None = None
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.pending_producers: dict[int, asyncio.Future[None]] = {}
        self.send_batches: list[Producer] = []  # producers with SENDs not yet submitted (send_batch.py)
        self.writable = True
        self.closed = False
        self.remote = "?"
        self.protocol_version = 0
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self._last_seen = time.monotonic()
        self._keepalive: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        # connection limits, CONNECT/frame time limits (connection_guard.py)
        self.guard = ConnectionGuard(self)
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
        self._process()

    def _process(self) -> None:
        frames = 0
        # runs of common SENDs are read by the compiled codec in one call (take_sends); tried
        # first and again after each SEND next_event gives, so other frames cost nothing extra
        try_sends = _SEND_RUNS and self.refusal is None
        try:
            while not self.closed and not self._input_held:
                if try_sends:
                    try_sends = False
                    sends = self.proto.take_sends()
                    if sends:
                        frames += len(sends)
                        handle_sends(self, sends, self._dispatch)
                        continue
                frame = self.proto.next_event()
                if frame is None:
                    break
                frames += 1
                if frame.type == T.SEND:
                    try_sends = _SEND_RUNS and self.refusal is None
                elif self.send_batches:
                    submit_sends(self)  # the SENDs before it are stored first
                self._dispatch(frame)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.remote, exc)
            self.close()
            return
        finally:
            if self.send_batches:
                submit_sends(self)
        # frames held back (authentication in progress) are not a slow sender's
        self.guard.after_data(frames, self.proto.buffered, timing=not self._input_held)
        self.flow.set_buffered(self.proto.buffered)

    def hold_input(self) -> None:
        """Handle no further frame until release_input() (authentication in progress)."""
        self._input_held = True
        self.update_reading()

    def release_input(self) -> None:
        self._input_held = False
        if self.transport is not None and not self.closed:
            self.update_reading()
            self._process()

    def update_reading(self) -> None:
        """Read from the socket unless input is held or flow control says stop."""
        reading = not (self._input_held or self.flow.paused)
        if reading != self._reading and self.transport is not None and not self.closed:
            self._reading = reading
            if reading:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.guard.close()
        self.flow.close()
        if self._keepalive is not None:
            self._keepalive.cancel()
        for timer in (self.refresh_timer, self.refusal_timer):
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

    # --- output ----------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def close_producer(self, producer_id: int) -> None:
        """Tell the client to close one of its producers (CLOSE_PRODUCER) and forget it."""
        self.write(commands.close_producer(producer_id))
        self.producers.pop(producer_id, None)

    def close_consumer(self, consumer_id: int) -> None:
        """Tell the client to close one of its consumers (CLOSE_CONSUMER) and forget it."""
        self.write(commands.close_consumer(consumer_id))
        self.consumers.pop(consumer_id, None)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.closed:
            out, self._out, self._out_bytes = self._out, [], 0
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def close(self) -> None:
        if self.closed:
            return
        self._flush()
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
                self.write(commands.error(request_id, exc.code, exc.message))
            elif exc is not None:
                log.error("request %s from %s failed: %r", request_id, self.remote, exc)
                self.write(commands.error(request_id, ServerError.UnknownError, f"internal error: {exc}"))

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
            self.write(commands.ping())
        self._keepalive = self._loop.call_later(KEEPALIVE_SECONDS, self._check_alive)

    # --- command dispatch ------------------------------------------------
    def _dispatch(self, frame: Frame) -> None:
        if self.refusal is not None:
            handlers_auth.refuse_request(self, frame.command)
            return
        if text_door.refused(self, frame):  # a string field that is not UTF-8
            return
        handler = _HANDLERS.get(frame.type)
        try:
            if handler is None:
                self._unsupported(frame.command)
            else:
                handler(self, frame)
        except LetterboxError as exc:
            self.reply_error(frame.command, exc.code, exc.message)
        except Exception as exc:  # a bug must not take the broker down
            log.exception("error handling %s from %s", T.Type.Name(frame.type), self.remote)
            self.reply_error(frame.command, ServerError.UnknownError, f"internal error: {exc}")

    def reply_error(self, cmd: pb.BaseCommand, code: int, message: str) -> None:
        rid = request_id_of(cmd)
        if cmd.type == T.SEND:
            self.write(commands.send_error(cmd.send.producer_id, cmd.send.sequence_id, code, message))
        elif cmd.type == T.ACK and cmd.ack.HasField("request_id"):
            self.write(commands.ack_response(cmd.ack.consumer_id, cmd.ack.request_id, code, message))
        elif cmd.type == T.LOOKUP:
            self.write(commands.lookup_error(rid or 0, code, message))
        elif cmd.type == T.PARTITIONED_METADATA:
            self.write(commands.partitioned_metadata_error(rid or 0, code, message))
        elif cmd.type == T.GET_SCHEMA:
            self.write(commands.get_schema_error(rid or 0, code, message))
        elif cmd.type == T.GET_OR_CREATE_SCHEMA:
            self.write(commands.get_or_create_schema_error(rid or 0, code, message))
        elif rid is not None:
            self.write(commands.error(rid, code, message))
        else:
            log.info("%s from %s failed: %s", T.Type.Name(cmd.type), self.remote, message)

    def _unsupported(self, cmd: pb.BaseCommand) -> None:
        name = T.Type.Name(cmd.type)
        if request_id_of(cmd) is None:
            log.warning("closing connection from %s: unsupported command %s", self.remote, name)
            self.close()
            return
        self.reply_error(cmd, ServerError.NotAllowedError, f"letterbox does not support the {name} command")

    # --- connection-level commands (CONNECT and AUTH_RESPONSE: handlers_auth) ---
    def handle_ping(self, frame: Frame) -> None:
        self.write(commands.pong())

    def handle_pong(self, frame: Frame) -> None:
        return None

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


def request_id_of(cmd: pb.BaseCommand) -> int | None:
    """The request id of whatever command this is, if it carries one."""
    try:
        name = T.Type.Name(cmd.type).lower()
    except ValueError:
        return None
    field = _FIELD_FOR_TYPE.get(name, name)
    try:
        body: Any = getattr(cmd, field)
    except AttributeError:
        return None
    if body is not None and "request_id" in body.DESCRIPTOR.fields_by_name and body.HasField("request_id"):
        return int(body.request_id)
    return None


_FIELD_FOR_TYPE = {
    "lookup": "lookupTopic",
    "lookup_response": "lookupTopicResponse",
    "partitioned_metadata": "partitionMetadata",
    "partitioned_metadata_response": "partitionMetadataResponse",
    "redeliver_unacknowledged_messages": "redeliverUnacknowledgedMessages",
    "close_producer": "close_producer",
    "close_consumer": "close_consumer",
    "consumer_stats": "consumerStats",
    "get_last_message_id": "getLastMessageId",
    "get_topics_of_namespace": "getTopicsOfNamespace",
    "get_schema": "getSchema",
    "get_or_create_schema": "getOrCreateSchema",
    "active_consumer_change": "active_consumer_change",
    "reached_end_of_topic": "reachedEndOfTopic",
    "auth_challenge": "authChallenge",
    "auth_response": "authResponse",
    "ack_response": "ackResponse",
    "new_txn": "newTxn",
    "add_partition_to_txn": "addPartitionToTxn",
    "add_subscription_to_txn": "addSubscriptionToTxn",
    "end_txn": "endTxn",
    "end_txn_on_partition": "endTxnOnPartition",
    "end_txn_on_subscription": "endTxnOnSubscription",
    "tc_client_connect_request": "tcClientConnectRequest",
    "watch_topic_list": "watchTopicList",
    "watch_topic_list_close": "watchTopicListClose",
    "topic_migrated": "topicMigrated",
}

_HANDLERS: dict[int, Any] = {
    **handlers_auth.HANDLERS,
    T.PING: ServerCnx.handle_ping,
    T.PONG: ServerCnx.handle_pong,
    **handlers_topic.HANDLERS,
    **handlers_producer.HANDLERS,
    **handlers_consumer.HANDLERS,
}
