# Asking a broker on the binary protocol, before a copy writes anything, whether it answers,
# whether it accepts our credentials and which protocol version it speaks: one CONNECT (with
# the token, when there is one) and one read-only request (the topics of a namespace), over a
# socket of our own, framed by letterbox.protocol. Apache Pulsar refuses credentials with an
# ERROR instead of CONNECTED; letterbox answers CONNECTED and then AuthenticationError to the
# request: both are a refusal here. The official client cannot tell these apart from a broker
# that is down (it retries until its operation timeout), hence this probe.
# Invariant: the probe sends nothing that writes (no producer, no subscription, no lookup that
# could create a topic), and a refusal never carries the token.
from __future__ import annotations

import re
import socket
import ssl
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from letterbox.protocol import FrameDecoder, ProtocolError, encode_command, pb
from letterbox.protocol import client_commands as cc

# What a migration needs of Apache Pulsar: time-based backlog quotas (the `backlogQuotaType`
# of the admin API, copied with each namespace) came with 2.8.0, whose brokers speak protocol
# version 17 (acknowledgement receipts) or later.
MIN_PULSAR_VERSION = (2, 8, 0)
MIN_PROTOCOL_VERSION = 17
PROBE_TIMEOUT = 10.0
_REQUEST_ID = 1


class ProbeFailed(Exception):
    """`kind` is "unreachable", "credentials" or "not-pulsar"; the message says the detail."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass(frozen=True)
class Answer:
    server_version: str  # as CONNECTED says it: "Pulsar Server4.0.8", "letterbox-0.1.0"
    protocol_version: int

    @property
    def is_letterbox(self) -> bool:
        return self.server_version.startswith("letterbox")


def version_tuple(text: str) -> tuple[int, ...] | None:
    """(2, 7, 0) of "2.7.0", "Pulsar Server2.7.0" or "4.0.8-SNAPSHOT"; None without a version."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m is None:
        return None
    return tuple(int(g) for g in m.groups(default="0"))


def _address(url: str) -> tuple[str, int, bool]:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("pulsar", "pulsar+ssl"):
        raise ProbeFailed("unreachable", "not a pulsar:// or pulsar+ssl:// URL")
    first = parsed.netloc.split(",")[0]  # the first of a multi-host URL
    host, _, port = first.rpartition(":")
    tls = parsed.scheme == "pulsar+ssl"
    try:
        return (host or first).strip("[]"), int(port) if host else (6651 if tls else 6650), tls
    except ValueError:
        raise ProbeFailed("unreachable", f"no port number in {first!r}") from None


def probe(url: str, credentials: tuple[str, bytes] | None = None, tls_context: ssl.SSLContext | None = None) -> Answer:
    """CONNECT to the broker at `url` (with `credentials`: auth method name and data), then ask
    for the topics of public/default (any answer but AuthenticationError will do)."""
    host, port, tls = _address(url)
    try:
        sock = socket.create_connection((host, port), timeout=PROBE_TIMEOUT)
    except OSError as exc:
        raise ProbeFailed("unreachable", exc.strerror or str(exc)) from None
    try:
        if tls:
            ctx = tls_context or ssl.create_default_context()
            ctx.check_hostname = False  # as the official clients (tls_validate_hostname off by default)
            sock = ctx.wrap_socket(sock, server_hostname=host)
        return _converse(sock, credentials)
    except ssl.SSLError as exc:
        raise ProbeFailed("unreachable", f"TLS failed: {exc.reason or exc}") from None
    except TimeoutError:
        raise ProbeFailed("not-pulsar", "no answer to a Pulsar CONNECT within "
                                        f"{PROBE_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise ProbeFailed("unreachable", exc.strerror or str(exc)) from None
    finally:
        sock.close()


def _converse(sock: socket.socket, credentials: tuple[str, bytes] | None) -> Answer:
    method, data = credentials or (None, None)
    secret = data.decode(errors="replace") if data else None
    sock.sendall(cc.connect("letterbox-migrate-probe", pb.v21, auth_method_name=method, auth_data=data))
    frames = _frames(sock)
    cmd = next(frames)
    if cmd.type == pb.BaseCommand.ERROR:
        raise _refusal(cmd.error, secret)
    if cmd.type != pb.BaseCommand.CONNECTED:
        raise ProbeFailed("not-pulsar", f"answered CONNECT with {pb.BaseCommand.Type.Name(cmd.type)}")
    answer = Answer(cmd.connected.server_version, cmd.connected.protocol_version)
    ask = pb.CommandGetTopicsOfNamespace(request_id=_REQUEST_ID, namespace="public/default")
    sock.sendall(encode_command(pb.BaseCommand(type=pb.BaseCommand.GET_TOPICS_OF_NAMESPACE,
                                               getTopicsOfNamespace=ask)))
    for cmd in frames:
        if cmd.type == pb.BaseCommand.ERROR and cmd.error.error == pb.AuthenticationError:
            raise _refusal(cmd.error, secret)
        if cmd.type in (pb.BaseCommand.ERROR, pb.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE):
            return answer  # answered as to an authenticated client (whatever the namespace holds)
    return answer


def _frames(sock: socket.socket) -> Iterator[pb.BaseCommand]:
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ProbeFailed("not-pulsar", "closed the connection without an answer "
                                            "(a TLS port given as pulsar://, or not a Pulsar broker?)")
        try:
            decoder.feed(data)
            while (frame := decoder.next_frame()) is not None:
                if frame.type != pb.BaseCommand.PING:
                    yield frame.command
        except ProtocolError as exc:
            raise ProbeFailed("not-pulsar", f"answered with bytes that are not Pulsar frames ({exc})") from None


def _refusal(error: pb.CommandError, secret: str | None) -> ProbeFailed:
    message = error.message
    if secret:
        message = message.replace(secret, "<credentials>")
    kind = "credentials" if error.error in (pb.AuthenticationError, pb.AuthorizationError) else "not-pulsar"
    return ProbeFailed(kind, f"{pb.ServerError.Name(error.error)}: {message[:200]}")
