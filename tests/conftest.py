"""Shared fixtures: a real letterbox broker process on an ephemeral port."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LISTEN_RE = re.compile(r"listening on pulsar://[^:]+:(\d+)")
ADMIN_RE = re.compile(r"admin on http://[^:]+:(\d+)")


class BrokerProcess:
    """A `letterbox standalone` child process with its own data directory."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_env = env or {}
        self.args = args or []
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.admin_port = 0
        self.lines: list[str] = []

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("LETTERBOX_LOG_LEVEL", "INFO")
        cmd = [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(self.data_dir),
               "--port", "0", "--admin-port", "0", "--bind", "127.0.0.1", *self.args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                m = LISTEN_RE.search(line)
                if m:
                    a = ADMIN_RE.search(line)
                    if a:
                        self.admin_port = int(a.group(1))
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.kill()
            raise RuntimeError("broker did not start:\n" + "".join(self.lines))
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

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(data_dir: Path | None = None, env: dict[str, str] | None = None, args: list[str] | None = None) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / "data", env, args).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield b
    code = b.stop()
    assert code == 0, "broker did not shut down cleanly:\n" + b.log()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[object]:
    import pulsar

    c = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    yield c
    c.close()


def _quiet_logger() -> object:
    import logging

    import pulsar

    lg = logging.getLogger("pulsar-client")
    lg.setLevel(logging.WARNING)
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn) if hasattr(pulsar, "ConsoleLogger") else lg


def wait_until(predicate: object, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(interval)
    return False
