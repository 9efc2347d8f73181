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

# the start-up line names every listener that is on (standalone.startup_line)
STARTUP_RE = re.compile(r"data in .*; authentication ")
PORT_RES = {
    "port": re.compile(r"listening on pulsar://[^ ,]+:(\d+)"),
    "tls_port": re.compile(r"tls on pulsar\+ssl://[^ ,]+:(\d+)"),
    "admin_port": re.compile(r"admin on http://[^ ,]+:(\d+)"),
    "admin_tls_port": re.compile(r"admin tls on https://[^ ,]+:(\d+)"),
}


COMPAT_ENV = "LETTERBOX_PULSAR_COMPATIBLE_ONLY"
# the broker's default replay window of acknowledged entries (acked_replay_minutes); test
# brokers run without one unless started with this environment
REPLAY_WINDOW = {"LETTERBOX_ACKED_REPLAY_MINUTES": "10"}
EXTENSION_TESTS = pytest.StashKey[list[tuple[str, str]]]()  # (node id, reason) deselected in compat mode


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--pulsar-compatible-only", action="store_true", default=False,
        help="start every test broker with --pulsar-compatible-only (letterbox extensions off, as Apache "
             "Pulsar) and deselect the tests marked letterbox_extension",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "letterbox_extension(reason): needs a letterbox-only extension; not run with "
                   "--pulsar-compatible-only (the reason says which)")
    if config.getoption("--pulsar-compatible-only"):
        os.environ[COMPAT_ENV] = "true"  # inherited by every broker the tests start


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--pulsar-compatible-only"):
        return
    kept, dropped, reasons = [], [], []
    for item in items:
        marker = item.get_closest_marker("letterbox_extension")
        if marker is not None and not marker.args:
            raise pytest.UsageError(f"{item.nodeid}: letterbox_extension needs a reason")
        (dropped if marker is not None else kept).append(item)
        if marker is not None:
            reasons.append((item.nodeid, str(marker.args[0])))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    config.stash[EXTENSION_TESTS] = reasons


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Name every test left out of a --pulsar-compatible-only run, with its reason: a
    deselected test is not a passed one, and the reader sees which and why."""
    dropped = config.stash.get(EXTENSION_TESTS, [])
    if dropped:
        terminalreporter.section(f"not run against --pulsar-compatible-only: {len(dropped)} letterbox_extension tests")
        for nodeid, reason in dropped:
            terminalreporter.line(f"{nodeid}: {reason}")


def pulsar_compatible_only() -> bool:
    """Whether this run's brokers are started --pulsar-compatible-only."""
    return os.environ.get(COMPAT_ENV) == "true"


class BrokerProcess:
    """A `letterbox standalone` child process with its own data directory. By default its
    plain binary and admin ports are ephemeral and it binds 127.0.0.1; with
    `default_listeners=False` it gets only `args` (TLS-only brokers, the default bind).
    The ports of every listener that is on are read from the start-up line."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, args: list[str] | None = None,
                 *, default_listeners: bool = True) -> None:
        self.data_dir = data_dir
        self.extra_env = env or {}
        self.args = args or []
        self.default_listeners = default_listeners
        self.proc: subprocess.Popen[str] | None = None
        self.ports: dict[str, int] = {}
        self.lines: list[str] = []
        self.exited = threading.Event()  # its stderr ended

    @property
    def port(self) -> int:
        return self.ports.get("port", 0)

    @property
    def admin_port(self) -> int:
        return self.ports.get("admin_port", 0)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"pulsar+ssl://localhost:{self.ports['tls_port']}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def admin_tls_url(self) -> str:
        return f"https://localhost:{self.ports['admin_tls_port']}"

    @property
    def startup_line(self) -> str:
        return next(line for line in self.lines if STARTUP_RE.search(line))

    def start(self, timeout: float = 30.0, expect_ready: bool = True) -> BrokerProcess:
        """Start and wait for the start-up line; with expect_ready=False a broker that exits
        instead (a refused configuration) is no error: see `exited`, `log()`."""
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("LETTERBOX_LOG_LEVEL", "INFO")
        # test brokers trim acknowledged entries at once (what most storage and admin tests
        # count on); the replay window's own tests start brokers with REPLAY_WINDOW
        env.setdefault("LETTERBOX_ACKED_REPLAY_MINUTES", "0")
        listeners = ["--port", "0", "--admin-port", "0", "--bind", "127.0.0.1"] if self.default_listeners else []
        cmd = [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(self.data_dir),
               *listeners, *self.args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                if STARTUP_RE.search(line):
                    for key, rx in PORT_RES.items():
                        m = rx.search(line)
                        if m:
                            self.ports[key] = int(m.group(1))
                    ready.set()
            self.exited.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if (not ready.wait(timeout) or not self.ports) and expect_ready:
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
