# Giving memory back to the operating system after a connection that held large buffers
# closes. CPython frees a large bytearray (a frame being received) with free(); glibc keeps
# freed chunks in its heaps (and, after a large mmapped chunk is freed, raises its mmap
# threshold so that later large buffers come from the heap too), so without a trim the
# broker's RSS stays near its peak after a flood of large frames. After a connection that
# held at least TRIM_AFTER_BYTES goes away, malloc_trim(0) runs once, TRIM_DELAY_SECONDS
# later, in a worker thread (a wave of closes costs one trim; one over 350 MB of freed,
# fragmented heap took 29 ms). Where the C library has no malloc_trim (musl, macOS)
# nothing is done.
# Invariant: at most one trim is scheduled or running at a time per process.
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger("letterbox.cnx")
TRIM_AFTER_BYTES = 1024 * 1024
TRIM_DELAY_SECONDS = 0.5


def _load_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_trim()
_pending: asyncio.AbstractEventLoop | None = None  # the loop a trim is scheduled on or running for


def pending() -> bool:
    """A trim is scheduled or running (on a loop still open)."""
    return _pending is not None and not _pending.is_closed()


def after_free(nbytes: int) -> None:
    """`nbytes` were just given back: schedule a trim if that is enough to matter."""
    global _pending
    if _malloc_trim is None or nbytes < TRIM_AFTER_BYTES or pending():
        return
    _pending = asyncio.get_running_loop()
    _pending.call_later(TRIM_DELAY_SECONDS, _start, _pending)


def _start(loop: asyncio.AbstractEventLoop) -> None:
    def done(_: object) -> None:
        global _pending
        _pending = None

    loop.run_in_executor(None, trim_now).add_done_callback(done)


def trim_now() -> bool:
    """Give the heaps' free memory back now; True when some was released."""
    if _malloc_trim is None:
        return False
    return bool(_malloc_trim(0))
