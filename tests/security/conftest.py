"""Fixtures for the security tests: test-time certificates and keys, and a
broker process that may listen on TLS only (tests.conftest.BrokerProcess
without its default listeners; the ports of `pulsar://`, `pulsar+ssl://`,
`http://` and `https://` are read from the start-up line)."""
from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pulsar
import pytest

from tests.conftest import BrokerProcess
from tests.security.http import call
from tests.security.pki import Pki, TokenKeys


class SecureBroker(BrokerProcess):
    """A broker given exactly `args`: no default plain ports or bind address."""

    def __init__(self, data_dir: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, env, args, default_listeners=False)

    def start(self, timeout: float = 30.0, expect_ready: bool = True) -> SecureBroker:
        super().start(timeout, expect_ready)
        return self


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def broker_cert(pki: Pki) -> Any:
    return pki.issue("broker", server=True)


@pytest.fixture(scope="session")
def token_keys(tmp_path_factory: pytest.TempPathFactory) -> TokenKeys:
    return TokenKeys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[Any]:
    started: list[SecureBroker] = []

    def make(args: list[str], env: dict[str, str] | None = None, expect_ready: bool = True) -> SecureBroker:
        b = SecureBroker(tmp_path / f"data{len(started)}", args, env).start(expect_ready=expect_ready)
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


def tls_args(broker_cert: Any, pki: Pki, plain: bool = False) -> list[str]:
    """Flags of a broker with TLS listeners on free ports (plain ones off unless `plain`)."""
    return [
        "--port", "0" if plain else "off", "--admin-port", "0" if plain else "off",
        "--broker-service-port-tls", "0", "--web-service-port-tls", "0",
        "--tls-certificate-file-path", str(broker_cert.cert),
        "--tls-key-file-path", str(broker_cert.key),
        "--tls-trust-certs-file-path", str(pki.ca),
    ]


def secured_tls_args(broker_cert: Any, pki: Pki, token_keys: TokenKeys, super_user: str) -> list[str]:
    """Flags of a broker with TLS listeners only, token authentication (HS256 with
    token_keys' secret) and authorization on, `super_user` its super user role."""
    return [
        *tls_args(broker_cert, pki),
        "--authentication-enabled", "--authentication-providers", "token",
        "--token-secret-key", f"file://{token_keys.secret_file}",
        "--authorization-enabled", "--super-user-roles", super_user,
    ]


# --- sec-admin: a module-scoped broker with token authentication and authorization on
# (plain ports), whose super user is `admin`; tokens for any role are signed with its key.
SUPER_USER = "admin"


class Secured:
    def __init__(self, broker: BrokerProcess, secret: bytes) -> None:
        self.broker = broker
        self.secret = secret

    def token(self, role: str, **claims: Any) -> str:
        return jwt.encode({"sub": role, **claims}, self.secret, algorithm="HS256")

    def admin(self, method: str, path: str, body: Any = None, role: str | None = SUPER_USER) -> tuple[int, Any]:
        status, _, reply = call(self.broker.admin_url, method, path, body,
                                token=self.token(role) if role else None)
        return status, reply


def secure_env(secret: bytes) -> dict[str, str]:
    return {
        "LETTERBOX_AUTHENTICATION_ENABLED": "true",
        "LETTERBOX_AUTHENTICATION_PROVIDERS": "token",
        "LETTERBOX_TOKEN_SECRET_KEY": "data:;base64," + base64.b64encode(secret).decode(),
        "LETTERBOX_AUTHORIZATION_ENABLED": "true",
        "LETTERBOX_SUPER_USER_ROLES": SUPER_USER,
    }


@pytest.fixture
def role_client(secured: Secured) -> Iterator[Callable[[str], Any]]:
    """pulsar.Client(secured broker, token of `role`), closed after the test."""
    opened: list[pulsar.Client] = []

    def make(role: str) -> pulsar.Client:
        c = pulsar.Client(secured.broker.url, authentication=pulsar.AuthenticationToken(secured.token(role)),
                          operation_timeout_seconds=10, logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"))
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    secret = os.urandom(32)
    data: Path = tmp_path_factory.mktemp("secured") / "data"
    b = BrokerProcess(data, env=secure_env(secret)).start()
    yield Secured(b, secret)
    code = b.stop()
    assert code == 0, "broker did not shut down cleanly:\n" + b.log()
