"""Python scenarios over a raw socket, with letterbox's own codec: what a broker answers to
requests for features it does not offer (transactions, topic-list watchers) and what it says of
itself in CONNECTED. Each request goes on a connection of its own."""
from __future__ import annotations

import socket
import struct
import time
from typing import Any

from letterbox.protocol import FrameDecoder, pb
from tests.conformance.registry import scenario
from tests.conformance.targets import Target

T = pb.BaseCommand
TIMEOUT_S = 10.0


def _frame(cmd: pb.BaseCommand) -> bytes:
    body = cmd.SerializeToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


def _connect_cmd() -> bytes:
    flags = pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True,
                            supports_partial_producer=True, supports_topic_watchers=True)
    return _frame(T(type=T.CONNECT, connect=pb.CommandConnect(
        client_version="letterbox-conformance", protocol_version=21, feature_flags=flags)))


def _exchange(t: Target, request: bytes | None) -> tuple[Any, Any]:
    """CONNECT (and the request, if any) on a fresh connection: (CONNECTED, the answer)."""
    host, port = t.service_url.removeprefix("pulsar://").split(":")
    decoder = FrameDecoder()
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(_connect_cmd())
        connected = _next(sock, decoder)
        if request is None:
            return connected, None
        sock.sendall(request)
        try:
            return connected, _next(sock, decoder)
        except (TimeoutError, ConnectionError) as e:
            return connected, type(e).__name__


def _next(sock: socket.socket, decoder: FrameDecoder) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            if frame.type in (T.PING, T.PONG):
                continue
            return frame.command
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        decoder.feed(data)


def _answer(cmd: Any) -> Any:
    """An answer as a record: its command type, and its error code when it carries one."""
    if isinstance(cmd, str):
        return cmd
    name = T.Type.Name(cmd.type)
    for field in ("error", "newTxnResponse", "tcClientConnectResponse", "watchTopicListSuccess"):
        if cmd.HasField(field):
            inner = getattr(cmd, field)
            code = getattr(inner, "error", None) if field != "error" else inner.error
            if field != "watchTopicListSuccess" and inner.HasField("error"):
                return {"type": name, "error": pb.ServerError.Name(code)}
    return {"type": name}


@scenario
def connected_answer(t: Target, p: str) -> Any:
    connected, _ = _exchange(t, None)
    c = connected.connected
    flags = sorted(f.name for f, v in c.feature_flags.ListFields() if v) if c.HasField("feature_flags") else []
    return {"type": T.Type.Name(connected.type), "protocol_version": c.protocol_version,
            "max_message_size": c.max_message_size, "feature_flags": flags}


@scenario
def transaction_coordinator_connect_without_transactions(t: Target, p: str) -> Any:
    req = _frame(T(type=T.TC_CLIENT_CONNECT_REQUEST,
                   tcClientConnectRequest=pb.CommandTcClientConnectRequest(request_id=7, tc_id=0)))
    return _answer(_exchange(t, req)[1])


@scenario
def new_transaction_without_transactions(t: Target, p: str) -> Any:
    req = _frame(T(type=T.NEW_TXN, newTxn=pb.CommandNewTxn(request_id=8, txn_ttl_seconds=60, tc_id=0)))
    return _answer(_exchange(t, req)[1])


@scenario
def watch_topic_list(t: Target, p: str) -> Any:
    short = p.removeprefix("persistent://public/default/")
    req = _frame(T(type=T.WATCH_TOPIC_LIST, watchTopicList=pb.CommandWatchTopicList(
        request_id=9, watcher_id=1, namespace="public/default",
        topics_pattern=f"persistent://public/default/{short}-.*")))
    return _answer(_exchange(t, req)[1])
