# One data directory, one broker. A broker holds an exclusive flock on
# <data_dir>/letterbox.lock for its whole life; the file says who holds it
# (pid and listening address, as JSON) so a second broker can refuse to start
# with a message naming the owner. The kernel drops a flock when its holder
# dies, so the lock of a killed broker (kill -9) is simply taken over; the file
# itself is never deleted (unlinking would let two brokers lock two inodes).
# Invariant: while `held`, no other process can hold the lock on this directory.
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

LOCK_FILE = "letterbox.lock"


class DataDirectoryInUse(OSError):
    """Another live process holds the data directory's lock."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, address: str = "not listening yet") -> None:
        """Take the lock or raise DataDirectoryInUse naming its holder."""
        if self._fd is not None:
            return
        self._fd = self._lock()
        self.set_address(address)

    def probe(self) -> None:
        """Raise DataDirectoryInUse now if another process holds the lock (a cheap
        early check before a slow start-up; `acquire` still decides)."""
        if self._fd is None and self.path.exists():
            os.close(self._lock())

    def _lock(self) -> int:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise DataDirectoryInUse(
                f"data directory {self.data_dir.resolve()} is in use by pid {owner.get('pid', '?')} "
                f"(listening on {owner.get('address', '?')}); stop that broker or choose another --data-dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def set_address(self, address: str) -> None:
        """Record where the holder listens (shown to a broker refused the directory)."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "address": address}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the only descriptor drops the flock


def _read_owner(fd: int) -> dict[str, object]:
    try:
        raw = os.pread(fd, 4096, 0)
        owner = json.loads(raw.decode()) if raw else {}
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
