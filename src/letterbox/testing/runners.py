# The two ways letterbox.testing runs a broker, behind one small interface
# (start, stop, ports, log lines):
#   EmbeddedRunner  the broker (Standalone) on an asyncio loop in a background
#                   thread of the calling process: up in well under a second,
#                   its log taken from the `letterbox` logger.
#   ProcessRunner   `python -m letterbox standalone` as a child process, its
#                   ports read from the start-up line on stderr.
# Invariants: start() returns only once both listeners accept connections, or
# raises with the broker's log; stop() is idempotent and leaves no thread or
# process behind.
from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from letterbox.config import BrokerConfig

STARTUP_RE = re.compile(r"data in .*; authentication ")
PORT_RE = re.compile(r"listening on pulsar://[^ ,]+:(\d+)")
ADMIN_PORT_RE = re.compile(r"admin on http://[^ ,]+:(\d+)")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries its log."""


class Runner(Protocol):
    port: int
    admin_port: int
    lines: list[str]

    def start(self, timeout: float) -> None: ...

    def stop(self) -> None: ...


class _LinesHandler(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n")


class EmbeddedRunner:
    """A broker on a daemon thread of this process."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.port = 0
        self.admin_port = 0
        self.lines: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._standalone: Any = None
        self._handler = _LinesHandler(self.lines)
        self._old_level = logging.NOTSET

    def start(self, timeout: float) -> None:
        from letterbox.standalone import Standalone, startup_line

        logger = logging.getLogger("letterbox")
        self._old_level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(self._handler)
        config = BrokerConfig.load(overrides=self.settings)
        standalone = Standalone(config)
        loop = asyncio.new_event_loop()
        started: Future[None] = Future()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(standalone.start())
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            loop.run_forever()
            loop.close()

        self._loop, self._standalone = loop, standalone
        self._thread = threading.Thread(target=serve, name="letterbox-embedded-broker", daemon=True)
        self._thread.start()
        try:
            started.result(timeout)
        except BaseException as exc:
            self._thread = None
            self._detach()
            raise BrokerStartError(f"the embedded broker did not start: {exc}\n{''.join(self.lines)}") from exc
        self.port, self.admin_port = standalone.port, standalone.admin_port
        logging.getLogger("letterbox").info("letterbox (embedded) %s", startup_line(standalone))

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        self._thread = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._standalone.stop(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            self._detach()

    def _detach(self) -> None:
        logger = logging.getLogger("letterbox")
        logger.removeHandler(self._handler)
        logger.setLevel(self._old_level)


class ProcessRunner:
    """`letterbox standalone` in a child process; settings go in as LETTERBOX_* variables."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.port = 0
        self.admin_port = 0
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float) -> None:
        env = dict(os.environ)
        for key, value in self.settings.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, list | tuple):
                value = ",".join(map(str, value))
            env["LETTERBOX_" + key.upper()] = str(value)
        env.setdefault("LETTERBOX_LOG_LEVEL", "INFO")
        cmd = [sys.executable, "-m", "letterbox", "standalone"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        ready = threading.Event()
        proc = self.proc

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.lines.append(line)
                if STARTUP_RE.search(line):
                    port, admin = PORT_RE.search(line), ADMIN_PORT_RE.search(line)
                    self.port = int(port[1]) if port else 0
                    self.admin_port = int(admin[1]) if admin else 0
                    ready.set()
            ready.set()

        threading.Thread(target=pump, name="letterbox-broker-log", daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.stop()
            raise BrokerStartError("letterbox standalone did not start:\n" + "".join(self.lines))

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

