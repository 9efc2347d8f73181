"""Authentication on the binary protocol with the official client: token (HS256
secret key, RS256 public key, a token_supplier), basic (htpasswd: $apr1$ and
bcrypt hashes), refusals with AuthenticationError and a message saying why."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import bcrypt
import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.conftest import _quiet_logger
from tests.security.clients import official_client, round_trip
from tests.security.conftest import SecureBroker
from tests.security.http import call
from tests.security.pki import TokenKeys
from tests.security.wire import T, Wire

# `openssl passwd -apr1 -salt xyz12345 secret`
APR1_SECRET = "$apr1$xyz12345$hVFg3wOytQE97CWCezCu2/"


@pytest.fixture(scope="module")
def htpasswd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("basic") / ".htpasswd"
    bob = bcrypt.hashpw(b"bob-pw", bcrypt.gensalt(5)).decode().replace("$2b$", "$2y$", 1)
    path.write_text(f"alice:{APR1_SECRET}\nbob:{bob}\n")
    return path


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory: pytest.TempPathFactory, token_keys: TokenKeys, htpasswd: Path) -> Any:
    b = SecureBroker(tmp_path_factory.mktemp("auth") / "data", [
        "--port", "0", "--admin-port", "0",
        "--authentication-enabled", "--authentication-providers", "token,basic",
        "--token-secret-key", f"file://{token_keys.secret_file}",
        "--token-public-key", f"file://{token_keys.public_file}",
        "--basic-auth-conf", str(htpasswd),
    ]).start()
    yield b
    b.stop()


def _client(url: str, auth: Any) -> pulsar.Client:
    return official_client(url, authentication=auth)


def _round_trip(client: pulsar.Client, topic: str) -> None:
    round_trip(client, topic, b"hello")


def _refused_reason(port: int, method: str, data: bytes) -> str:
    """What the broker answers a client whose credentials it refuses: CONNECTED (so the
    official clients can report the error), then AuthenticationError with the reason on
    the first request, then a close."""
    wire = Wire(port)
    try:
        assert wire.connect(method, data).type == T.CONNECTED
        wire.send(client_commands.lookup("persistent://public/default/t", request_id=7))
        reply = wire.next(10)
        assert reply.type == T.LOOKUP_RESPONSE
        body = reply.lookupTopicResponse
        assert body.request_id == 7 and body.response == pb.CommandLookupTopicResponse.Failed
        assert body.error == pb.ServerError.Value("AuthenticationError")
        assert wire.closed_by_broker()
        return str(body.message)
    finally:
        wire.close()


def test_startup_line_says_authentication_is_on(auth_broker: SecureBroker) -> None:
    assert "authentication on (token, basic)" in auth_broker.startup_line
    assert "listening on pulsar://127.0.0.1:" in auth_broker.startup_line


@pytest.mark.parametrize("alg", ["HS256", "RS256"])
def test_valid_token_works(auth_broker: SecureBroker, token_keys: TokenKeys, alg: str) -> None:
    token = token_keys.hs256("svc-a") if alg == "HS256" else token_keys.rs256("svc-a", expires_in=3600)
    client = _client(auth_broker.url, pulsar.AuthenticationToken(token))
    try:
        _round_trip(client, f"token-{alg}")
    finally:
        client.close()


def test_token_supplier_callable_works(auth_broker: SecureBroker, token_keys: TokenKeys) -> None:
    calls: list[int] = []

    def supplier() -> str:
        calls.append(1)
        return token_keys.hs256("svc-supplied", expires_in=3600)

    client = _client(auth_broker.url, pulsar.AuthenticationToken(supplier))
    try:
        _round_trip(client, "token-supplier")
    finally:
        client.close()
    assert calls, "the supplier was never asked for a token"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("other-key", "signed with another key"),
        ("expired", "the token expired at"),
        ("garbage", "not a valid JWT"),
    ],
)
def test_bad_tokens_get_authentication_error(
    auth_broker: SecureBroker, token_keys: TokenKeys, kind: str, reason: str
) -> None:
    token = {
        "other-key": token_keys.hs256("intruder", secret=b"a-different-secret-of-enough-length"),
        "expired": token_keys.hs256("svc-a", expires_in=-60),
        "garbage": "this is not a token",
    }[kind]
    client = _client(auth_broker.url, pulsar.AuthenticationToken(token))
    try:
        with pytest.raises(pulsar.AuthenticationError):
            client.create_producer(f"bad-token-{kind}")
    finally:
        client.close()
    assert reason in _refused_reason(auth_broker.ports["port"], "token", token.encode())


def test_no_credentials_are_refused_without_anonymous_role(auth_broker: SecureBroker) -> None:
    client = pulsar.Client(auth_broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        with pytest.raises(pulsar.AuthenticationError):
            client.create_producer("anonymous")
    finally:
        client.close()
    message = _refused_reason(auth_broker.ports["port"], "none", b"")
    assert "Authentication required" in message and "token, basic" in message


@pytest.mark.parametrize(("user", "password"), [("alice", "secret"), ("bob", "bob-pw")])
def test_basic_works(auth_broker: SecureBroker, user: str, password: str) -> None:
    """alice has an Apache $apr1$ hash, bob a bcrypt $2y$ one."""
    client = _client(auth_broker.url, pulsar.AuthenticationBasic(user, password))
    try:
        _round_trip(client, f"basic-{user}")
    finally:
        client.close()


@pytest.mark.parametrize(
    ("user", "password", "reason"),
    [("alice", "wrong", "wrong password for user 'alice'"), ("carol", "x", "no such user 'carol'")],
)
def test_basic_refusals(auth_broker: SecureBroker, user: str, password: str, reason: str) -> None:
    client = _client(auth_broker.url, pulsar.AuthenticationBasic(user, password))
    try:
        with pytest.raises(pulsar.AuthenticationError):
            client.create_producer("basic-refused")
    finally:
        client.close()
    assert reason in _refused_reason(auth_broker.ports["port"], "basic", f"{user}:{password}".encode())


def test_basic_method_argument(auth_broker: SecureBroker) -> None:
    """The official client sends `method` as the auth method name: 'basic' (its default)
    selects the basic provider; a name no provider has is refused, saying so."""
    ok = _client(auth_broker.url, pulsar.AuthenticationBasic("alice", "secret", method="basic"))
    odd = _client(auth_broker.url, pulsar.AuthenticationBasic("alice", "secret", method="custom"))
    try:
        ok.create_producer("basic-method").close()
        with pytest.raises(pulsar.AuthenticationError):
            odd.create_producer("basic-method")
    finally:
        ok.close()
        odd.close()
    reason = _refused_reason(auth_broker.ports["port"], "custom", b"alice:secret")
    assert "Unsupported authentication method 'custom'" in reason


def test_anonymous_role_admits_clients_without_credentials(
    secure_broker: Any, token_keys: TokenKeys
) -> None:
    b = secure_broker(["--port", "0", "--admin-port", "0", "--authentication-enabled",
                       "--authentication-providers", "token", "--token-secret-key",
                       f"file://{token_keys.secret_file}", "--anonymous-user-role", "anonymous"])
    assert "anonymous role 'anonymous'" in b.startup_line
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        _round_trip(client, "anonymous-ok")
    finally:
        client.close()


def test_refused_connection_does_nothing_even_with_pipelined_requests(
    auth_broker: SecureBroker, token_keys: TokenKeys
) -> None:
    """Requests written right behind a refused CONNECT, in the same packet, are not
    handled: one AuthenticationError, a close, and no topic or subscription created
    (this broker has no authorization, so anything handled would have gone through)."""
    wire = Wire(auth_broker.ports["port"])
    topic = "persistent://public/default/refused-pipelined"
    try:
        wire.send(
            client_commands.connect("wire-test", 21, auth_method_name="token", auth_data=b"garbage")
            + client_commands.producer(topic, 1, 1)
            + client_commands.subscribe(topic, "s", 2, 2)
            + client_commands.partitioned_metadata(topic + "-meta", 3)
            + client_commands.lookup(topic, 4)
        )
        assert wire.next(10).type == T.CONNECTED
        reply = wire.next(10)
        assert reply.type == T.ERROR and reply.error.request_id == 1, reply
        assert reply.error.error == pb.ServerError.Value("AuthenticationError")
        assert wire.closed_by_broker()
    finally:
        wire.close()
    admin = f"http://127.0.0.1:{auth_broker.ports['admin_port']}"
    token = token_keys.hs256("inspector")
    assert call(admin, "GET", "/admin/v2/persistent/public/default")[0] == 401
    status, _, topics = call(admin, "GET", "/admin/v2/persistent/public/default", token=token)
    assert status == 200 and not [t for t in topics if "refused-pipelined" in t], topics
