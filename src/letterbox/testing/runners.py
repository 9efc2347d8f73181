# The two ways letterbox.testing runs a broker, behind one small interface
# (start, stop, ports, log lines):
#   EmbeddedRunner  (testing/embedded.py) the broker on an asyncio loop in a
#                   background thread of the calling process.
#   ProcessRunner   `python -m letterbox standalone` as a child process, its
#                   ports read from the start-up line on stderr.
# Invariants: start() returns only once the broker accepts connections (a
# ProcessRunner's admin server too), or raises with the broker's log; stop() is
# idempotent and leaves no thread or process behind.
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from letterbox.testing.errors import BrokerStartError

STARTUP_RE = re.compile(r"data in .*; authentication ")
PORT_RE = re.compile(r"listening on pulsar://[^ ,]+:(\d+)")
ADMIN_PORT_RE = re.compile(r"admin on http://[^ ,]+:(\d+)")


class Runner(Protocol):
    port: int
    lines: list[str]

    @property
    def admin_port(self) -> int: ...

    def start(self, timeout: float) -> None: ...

    def stop(self) -> None: ...


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

