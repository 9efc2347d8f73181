# The inbound side of a client connection: the frames received so far are read from the
# sans-IO ServerProtocol and handed to the handler of their command (`handle_<command>` in
# handlers_auth, handlers_topic, handlers_producer, handlers_consumer and
# handlers_consumer_queries). ServerCnx (the
# connection's state and its one outbound path) is given `process` when it is opened
# (`open_connection`) and calls it after each read, so the handlers depend on ServerCnx and
# ServerCnx on none of them.
# Invariants: no handler raises out of `process` (a LetterboxError becomes the reply with
# its Pulsar code, any other error an UnknownError reply); a protocol violation closes this
# connection only; SENDs reserved in a pass are submitted before any other frame is handled
# and before the pass ends (send_batch.py); a connection whose credentials were refused has
# every request refused.
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from letterbox.broker.connection import (
    handlers_auth,
    handlers_consumer,
    handlers_consumer_queries,
    handlers_producer,
    handlers_topic,
    text_door,
)
from letterbox.broker.connection.handlers_producer import handle_sends
from letterbox.broker.connection.send_batch import submit as submit_sends
from letterbox.broker.connection.server_cnx import ServerCnx
from letterbox.errors import LetterboxError, ServerError
from letterbox.protocol import ProtocolError, commands, pb
from letterbox.protocol.request_ids import request_id_of
from letterbox.protocol.speedups import send_codec

if TYPE_CHECKING:
    from letterbox.broker.connection.connection_broker import ConnectionBroker
    from letterbox.protocol import Frame

log = logging.getLogger("letterbox.cnx")
T = pb.BaseCommand
_SEND_RUNS = send_codec is not None  # ServerProtocol.take_sends can give anything


def open_connection(service: ConnectionBroker, tls: bool = False) -> ServerCnx:
    """A new client connection of `service` (the asyncio protocol factory's product)."""
    return ServerCnx(service, process, tls=tls)


def process(cnx: ServerCnx) -> None:
    """Handle every complete frame received (until input is held or the connection closes)."""
    frames = 0
    # runs of common SENDs are read by the compiled codec in one call (take_sends); tried
    # first and again after each SEND next_event gives, so other frames cost nothing extra
    try_sends = _SEND_RUNS and cnx.refusal is None
    proto = cnx.proto
    try:
        while not cnx.closed and not cnx.input_held:
            if try_sends:
                try_sends = False
                sends = proto.take_sends()
                if sends:
                    frames += len(sends)
                    handle_sends(cnx, sends, lambda f: dispatch(cnx, f))
                    continue
            frame = proto.next_event()
            if frame is None:
                break
            frames += 1
            if frame.type == T.SEND:
                try_sends = _SEND_RUNS and cnx.refusal is None
            elif cnx.send_batches:
                submit_sends(cnx)  # the SENDs before it are stored first
            dispatch(cnx, frame)
    except ProtocolError as exc:
        log.warning("closing connection from %s: %s", cnx.remote, exc)
        cnx.close()
        return
    finally:
        if cnx.send_batches:
            submit_sends(cnx)
    # frames held back (authentication in progress) are not a slow sender's
    cnx.guard.after_data(frames, proto.buffered, timing=not cnx.input_held)
    cnx.flow.set_buffered(proto.buffered)


def dispatch(cnx: ServerCnx, frame: Frame) -> None:
    """Hand one frame to its handler; its error becomes the reply."""
    if cnx.refusal is not None:
        handlers_auth.refuse_request(cnx, frame.command)
        return
    if text_door.refused(cnx, frame):  # a string field that is not UTF-8
        return
    handler = _HANDLERS.get(frame.type)
    try:
        if handler is None:
            _unsupported(cnx, frame.command)
        else:
            handler(cnx, frame)
    except LetterboxError as exc:
        cnx.reply_error(frame.command, exc.code, exc.message)
    except Exception as exc:  # a bug must not take the broker down
        log.exception("error handling %s from %s", T.Type.Name(frame.type), cnx.remote)
        cnx.reply_error(frame.command, ServerError.UnknownError, f"internal error: {exc}")


def _unsupported(cnx: ServerCnx, cmd: pb.BaseCommand) -> None:
    name = T.Type.Name(cmd.type)
    if request_id_of(cmd) is None:
        log.warning("closing connection from %s: unsupported command %s", cnx.remote, name)
        cnx.close()
        return
    cnx.reply_error(cmd, ServerError.NotAllowedError, f"letterbox does not support the {name} command")


def handle_ping(cnx: ServerCnx, frame: Frame) -> None:
    cnx.send(commands.pong())


def handle_pong(cnx: ServerCnx, frame: Frame) -> None:
    return None


_HANDLERS: dict[int, Any] = {
    **handlers_auth.HANDLERS,
    T.PING: handle_ping,
    T.PONG: handle_pong,
    **handlers_topic.HANDLERS,
    **handlers_producer.HANDLERS,
    **handlers_consumer.HANDLERS,
    **handlers_consumer_queries.HANDLERS,
}
