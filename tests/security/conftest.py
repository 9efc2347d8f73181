"""Fixtures for the security tests: test-time certificates and keys, and a
broker process that may listen on TLS only (its ports are read from the
start-up line: `listening on pulsar://`, `tls on pulsar+ssl://`,
`admin on http://`, `admin tls on https://`)."""
from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from tests.conftest import BrokerProcess
from tests.security.http import call
from tests.security.pki import Pki, TokenKeys

PORT_RES = {
    "port": re.compile(r"listening on pulsar://[^ ,]+:(\d+)"),
    "tls_port": re.compile(r"tls on pulsar\+ssl://[^ ,]+:(\d+)"),
    "admin_port": re.compile(r"admin on http://[^ ,]+:(\d+)"),
    "admin_tls_port": re.compile(r"admin tls on https://[^ ,]+:(\d+)"),
}
READY = re.compile(r"data in .*; authentication ")


class SecureBroker:
    def __init__(self, data_dir: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = args
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.ports: dict[str, int] = {}
        self.lines: list[str] = []
        self.exited = threading.Event()

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.ports['port']}"

    @property
    def tls_url(self) -> str:
        return f"pulsar+ssl://localhost:{self.ports['tls_port']}"

    @property
    def startup_line(self) -> str:
        return next(line for line in self.lines if READY.search(line))

    def start(self, timeout: float = 30.0, expect_ready: bool = True) -> SecureBroker:
        env = {**os.environ, "LETTERBOX_LOG_LEVEL": "INFO", **self.env}
        cmd = [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(self.data_dir), *self.args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                if READY.search(line):
                    for key, rx in PORT_RES.items():
                        m = rx.search(line)
                        if m:
                            self.ports[key] = int(m.group(1))
                    ready.set()
            self.exited.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(timeout)
        if expect_ready and not self.ports:
            self.stop()
            raise RuntimeError("broker did not start:\n" + self.log())
        return self

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self) -> str:
        return "".join(self.lines)


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


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    secret = os.urandom(32)
    data: Path = tmp_path_factory.mktemp("secured") / "data"
    b = BrokerProcess(data, env=secure_env(secret)).start()
    yield Secured(b, secret)
    code = b.stop()
    assert code == 0, "broker did not shut down cleanly:\n" + b.log()
