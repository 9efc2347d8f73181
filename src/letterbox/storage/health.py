# StorageHealth: whether the database accepts writes right now. A commit that fails on a
# storage fault (disk full, I/O error, read-only file system) makes the store "degraded" with
# that reason; the next commit that succeeds makes it healthy again. While degraded the Store
# retries (a probe write plus the dirty cursors) with a growing delay, capped at MAX_DELAY so
# the broker notices within ~1 s that space returned. Loop thread only.
from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path

from .errors import is_read_only

MIN_DELAY = 0.05
MAX_DELAY = 1.0


class StorageHealth:
    def __init__(self) -> None:
        self.fault: str | None = None  # the reason, while degraded
        self.read_only = False  # the fault is a read-only database or file system
        self.since = 0.0  # time.time() of the first failure of this degraded period
        self.faults_total = 0  # failed commits caused by a storage fault
        self.degraded_total = 0  # times the store became degraded
        self._delay = MIN_DELAY

    @property
    def degraded(self) -> bool:
        return self.fault is not None

    def failed(self, exc: BaseException, data_dir: Path | None = None) -> bool:
        """Record a failed commit; True if this starts a degraded period. The data directory
        is tried for a new file: SQLite reports a file system gone read-only (e.g. remounted
        after errors) as an I/O error, the file system says EROFS."""
        self.faults_total += 1
        self.read_only = is_read_only(exc) or (data_dir is not None and dir_is_read_only(data_dir))
        started = self.fault is None
        self.fault = str(exc) or type(exc).__name__
        if started:
            self.since = time.time()
            self.degraded_total += 1
            self._delay = MIN_DELAY
        return started

    def committed(self) -> bool:
        """Record a successful commit; True if this ends a degraded period."""
        if self.fault is None:
            return False
        self.fault = None
        self.read_only = False
        return True

    def next_delay(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, MAX_DELAY)
        return delay

    def describe(self) -> str:
        if self.fault is None:
            return "ok"
        kind = "read-only" if self.read_only else "write failed"
        return f"storage {kind} since {time.strftime('%H:%M:%S', time.gmtime(self.since))}Z: {self.fault}"


def dir_is_read_only(data_dir: Path) -> bool:
    probe = data_dir / ".letterbox-write-probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return False
