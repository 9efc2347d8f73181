"""Token expiry on open connections (Pulsar's authenticationRefreshCheckSeconds):
an expired token gets AUTH_CHALLENGE; fresh credentials keep the connection,
stale ones or a client that cannot refresh get AuthenticationError and a close."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from letterbox.protocol import client_commands
from tests.conftest import _quiet_logger, wait_until
from tests.security.pki import TokenKeys
from tests.security.wire import T, Wire


def _broker(secure_broker: Any, token_keys: TokenKeys) -> Any:
    return secure_broker([
        "--port", "0", "--admin-port", "0", "--authentication-enabled",
        "--authentication-providers", "token", "--token-secret-key", str(token_keys.secret_file),
        "--authentication-refresh-check-seconds", "1",
    ])


def test_expired_token_is_challenged_and_a_fresh_one_keeps_the_connection(
    secure_broker: Any, token_keys: TokenKeys
) -> None:
    b = _broker(secure_broker, token_keys)
    wire = Wire(b.ports["port"])
    try:
        assert wire.connect("token", token_keys.hs256("svc", expires_in=2).encode()).type == T.CONNECTED
        challenge = wire.next(15)
        assert challenge.type == T.AUTH_CHALLENGE
        assert challenge.authChallenge.challenge.auth_method_name == "token"
        wire.auth_response("token", token_keys.hs256("svc", expires_in=3600).encode())
        # still open and served two refresh periods later
        time.sleep(2.5)
        wire.send(client_commands.lookup("t", 3))
        reply = wire.next(10)
        assert reply.type == T.LOOKUP_RESPONSE and reply.lookupTopicResponse.request_id == 3
    finally:
        wire.close()


def test_stale_answer_to_the_challenge_closes_the_connection(secure_broker: Any, token_keys: TokenKeys) -> None:
    b = _broker(secure_broker, token_keys)
    wire = Wire(b.ports["port"])
    try:
        token = token_keys.hs256("svc", expires_in=2).encode()
        assert wire.connect("token", token).type == T.CONNECTED
        assert wire.next(15).type == T.AUTH_CHALLENGE
        wire.auth_response("token", token)  # the same, now expired, token
        error = wire.next(10)
        assert error.type == T.ERROR and error.error.error == 3  # AuthenticationError
        assert "expired" in error.error.message
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_client_that_cannot_refresh_is_closed_at_expiry(secure_broker: Any, token_keys: TokenKeys) -> None:
    b = _broker(secure_broker, token_keys)
    wire = Wire(b.ports["port"])
    try:
        token = token_keys.hs256("svc", expires_in=2).encode()
        assert wire.connect("token", token, refresh=False).type == T.CONNECTED
        error = wire.next(15)
        assert error.type == T.ERROR and "does not support credential refresh" in error.error.message
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_official_client_with_token_supplier_keeps_its_connection(
    secure_broker: Any, token_keys: TokenKeys
) -> None:
    """Short-lived tokens from a supplier: the client answers AUTH_CHALLENGE from the
    supplier, and its producer and consumer keep working across several expiries
    without being refused."""
    b = _broker(secure_broker, token_keys)
    calls: list[float] = []

    def supplier() -> str:
        calls.append(time.time())
        return token_keys.hs256("svc", expires_in=2)

    client = pulsar.Client(b.url, authentication=pulsar.AuthenticationToken(supplier),
                           operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        consumer = client.subscribe("refresh-topic", "s")
        producer = client.create_producer("refresh-topic")
        deadline = time.monotonic() + 30
        sent = 0
        while time.monotonic() < deadline and b.log().count("refreshed its credentials") < 2:
            producer.send(f"m{sent}".encode())
            sent += 1
            time.sleep(0.2)
        assert b.log().count("refreshed its credentials") >= 2, b.log()
        received = set()
        for _ in range(sent):
            msg = consumer.receive(10_000)
            received.add(msg.data())
            consumer.acknowledge(msg)
        assert received == {f"m{i}".encode() for i in range(sent)}
    finally:
        client.close()
    assert "refused connection" not in b.log()
    assert "Authentication refresh failed" not in b.log()
    assert wait_until(lambda: len(calls) >= 3, timeout=1)
