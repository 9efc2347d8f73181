# The source of `letterbox migrate --data-dir`: a stopped broker's data directory, served for the
# time of the migration by a private letterbox broker (`letterbox standalone` in a child process)
# bound to 127.0.0.1 on free ports, without authentication and without the caller's LETTERBOX_*
# settings, so the migration reads it through the same admin API and binary protocol as a
# running source. The caller checks first that the directory is a letterbox data dir no broker
# holds (cli.verify.held_data_dir); the private broker takes the directory's lock itself.
# Invariant: the private broker is stopped (SIGTERM, then SIGKILL after STOP_TIMEOUT) whatever
# happens to the migration, and only loopback clients can reach it while it runs.
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
_LISTENING = re.compile(r"listening on (pulsar://127\.0\.0\.1:\d+), admin on (http://127\.0\.0\.1:\d+)")


class SourceDidNotStart(RuntimeError):
    """The private broker exited or did not listen in time; the message is its last log line."""


@dataclass(frozen=True)
class PrivateBroker:
    service_url: str
    admin_url: str


@contextmanager
def serve_data_dir(data_dir: Path, timeout: float = START_TIMEOUT) -> Iterator[PrivateBroker]:
    """A private broker on `data_dir` while the block runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    cmd = [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(data_dir), "--port", "0",
           "--admin-port", "0", "--bind", "127.0.0.1", "--log-level", "INFO"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    lines: deque[str] = deque(maxlen=20)
    found: list[PrivateBroker] = []
    listening = threading.Event()

    def pump() -> None:  # reads the broker's log to its end, so the pipe never fills
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip())
            m = _LISTENING.search(line)
            if m and not found:
                found.append(PrivateBroker(m.group(1), m.group(2)))
                listening.set()
        listening.set()  # the broker exited

    reader = threading.Thread(target=pump, name="letterbox-migrate-source-log", daemon=True)
    reader.start()
    try:
        if not listening.wait(timeout) or not found:
            last = next((x for x in reversed(lines) if x.strip()), "no output")
            raise SourceDidNotStart(f"a broker on {data_dir} did not start: {last[-300:]}")
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)
