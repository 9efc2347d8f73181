# Authentication of a binary-protocol connection: CONNECT carries the
# client's method name and auth data, checked before anything else on the
# connection is handled. Accepted: CONNECTED, and ServerCnx.role is the role.
# Refused: CONNECTED, then every request gets AuthenticationError with the
# reason and the connection is closed (or after REFUSED_GRACE_SECONDS if the
# client asks nothing) -- Pulsar sends an ERROR before CONNECTED instead, which
# the official C++-based clients report only as a retryable connect failure.
# While a token-authenticated connection is open, every
# authentication_refresh_check_seconds the broker checks the token's expiry;
# an expired one gets AUTH_CHALLENGE, and the client's AUTH_RESPONSE must
# authenticate as the same role, else ERROR AuthenticationError and a close
# (Pulsar's authenticationRefreshCheckSeconds).
#
# Invariants: no frame after CONNECT is handled before authentication ends
# (ServerCnx holds its input), and a refused connection never reaches a
# handler; a refusal always says why, never a bare close or a hang; checks
# that may be slow (bcrypt, crypt) run off the event loop.
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from letterbox.errors import ServerError
from letterbox.protocol import commands, pb
from letterbox.security.authentication import AuthenticationFailed, Credentials, Session

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.protocol import Frame

log = logging.getLogger("letterbox.auth")
T = pb.BaseCommand
REFRESH_DATA = b"refresh"
REFUSED_GRACE_SECONDS = 10.0  # a refused connection that asks nothing is closed after this
# the deprecated AuthMethod enum of old clients, named as Pulsar names it
_LEGACY_METHODS = {
    pb.AuthMethodNone: "none",
    pb.AuthMethodYcaV1: "ycav1",
    pb.AuthMethodAthens: "athens",
}


def handle_connect(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.connect
    cnx.protocol_version = min(c.protocol_version, commands.PROTOCOL_VERSION)
    cnx.supports_auth_refresh = c.HasField("feature_flags") and c.feature_flags.supports_auth_refresh
    cnx.client_version = c.client_version
    auth = cnx.service.authentication
    if not auth.enabled:
        _connected(cnx)
        return
    if c.HasField("auth_method_name"):
        method = c.auth_method_name
    elif c.HasField("auth_method"):
        method = _LEGACY_METHODS.get(c.auth_method, "none")
    else:
        method = ""
    creds = Credentials(method, bytes(c.auth_data), cnx.peer_common_name)

    def done(session: Session) -> None:
        cnx.session = session
        cnx.role = session.role
        log.debug("connection from %s authenticated as %r (%s)", cnx.remote, session.role, session.method)
        _connected(cnx)
        cnx.release_input()
        _schedule_refresh(cnx)

    def failed(reason: str) -> None:
        # CONNECTED, then AuthenticationError with the reason on every request and a close:
        # the official clients report an ERROR before CONNECTED only as a connection
        # failure and retry it until their operation timeout
        cnx.refusal = reason
        _connected(cnx)
        cnx.release_input()
        cnx.refusal_timer = asyncio.get_running_loop().call_later(REFUSED_GRACE_SECONDS, cnx.close)

    cnx.hold_input()
    _authenticate(cnx, creds, done, failed)


def handle_auth_response(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.authResponse
    if cnx.session is None or not cnx.service.authentication.enabled:
        log.info("ignoring AUTH_RESPONSE from %s: no authentication in progress", cnx.remote)
        return
    original = cnx.session
    cnx.challenge_sent_at = None
    data = c.response if c.HasField("response") else pb.AuthData()
    creds = Credentials(data.auth_method_name or original.method, bytes(data.auth_data), cnx.peer_common_name)

    def done(session: Session) -> None:
        if session.role != original.role:
            refuse(cnx, f"Authentication refresh failed: the role cannot change on a connection "
                        f"(was {original.role!r}, now {session.role!r})")
            return
        cnx.session = session
        log.info("connection from %s refreshed its credentials for role %r", cnx.remote, session.role)

    # frames go on meanwhile: the role cannot change
    _authenticate(cnx, creds, done, lambda reason: refuse(cnx, reason))


def _authenticate(cnx: ServerCnx, creds: Credentials, on_success: Any, on_failure: Any) -> None:
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(None, cnx.service.authentication.authenticate_session, creds)

    def finished(f: asyncio.Future[Session]) -> None:
        if cnx.closed or f.cancelled():
            return
        exc = f.exception()
        if isinstance(exc, AuthenticationFailed):
            log.info("refused connection from %s: %s", cnx.remote, exc.message)
            on_failure(exc.message)
        elif exc is not None:
            log.error("authentication of %s failed: %r", cnx.remote, exc)
            on_failure(f"Authentication failed: internal error: {exc}")
        else:
            on_success(f.result())

    fut.add_done_callback(finished)


def refuse_request(cnx: ServerCnx, cmd: pb.BaseCommand) -> None:
    """Any command on a connection whose credentials were refused: AuthenticationError, close."""
    if cmd.type in (T.PING, T.PONG):
        if cmd.type == T.PING:
            cnx.send(commands.pong())
        return
    assert cnx.refusal is not None
    cnx.reply_error(cmd, ServerError.AuthenticationError, cnx.refusal)
    cnx.close()


def refuse(cnx: ServerCnx, message: str) -> None:
    cnx.send(commands.error(commands.NO_REQUEST_ID, ServerError.AuthenticationError, message))
    cnx.close()


def _connected(cnx: ServerCnx) -> None:
    cnx.send(
        commands.connected(
            server_version=f"letterbox-{cnx.service.version}",
            protocol_version=cnx.protocol_version,
            max_message_size=cnx.service.config.max_message_size,
            supports_auth_refresh=cnx.service.authentication.enabled,
            # PARTITIONED_METADATA honours metadata_auto_creation_enabled=false
            supports_get_partitioned_metadata_without_auto_creation=True,
        )
    )


def _schedule_refresh(cnx: ServerCnx) -> None:
    if cnx.session is None or cnx.session.expires_at is None or cnx.refresh_timer is not None:
        return
    period = float(cnx.service.config.authentication_refresh_check_seconds)
    cnx.refresh_timer = asyncio.get_running_loop().call_later(period, _check_expiry, cnx)


def _check_expiry(cnx: ServerCnx) -> None:
    cnx.refresh_timer = None
    session = cnx.session
    if cnx.closed or session is None:
        return
    if session.expires_at is not None and time.time() >= session.expires_at:
        if cnx.challenge_sent_at is not None:
            log.info("closing connection from %s: no fresh credentials after AUTH_CHALLENGE", cnx.remote)
            refuse(cnx, f"Authentication refresh failed: the credentials of role {session.role!r} "
                        "expired and the client did not answer AUTH_CHALLENGE with valid ones")
            return
        if not cnx.supports_auth_refresh:
            log.info("closing connection from %s: credentials expired, client cannot refresh", cnx.remote)
            refuse(cnx, f"Authentication expired for role {session.role!r} and the client does "
                        "not support credential refresh")
            return
        cnx.challenge_sent_at = time.monotonic()
        cnx.send(commands.auth_challenge(
            f"letterbox-{cnx.service.version}", session.method, REFRESH_DATA, cnx.protocol_version
        ))
    _schedule_refresh(cnx)


HANDLERS: dict[int, Any] = {
    T.CONNECT: handle_connect,
    T.AUTH_RESPONSE: handle_auth_response,
}
