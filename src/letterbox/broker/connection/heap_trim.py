# Giving memory back to the operating system after a connection that held large buffers
# closes. CPython frees a large bytearray (a frame being received) with free(); glibc keeps
# freed chunks in its heaps (and, after a large mmapped chunk is freed, raises its mmap
# threshold so that later large buffers come from the heap too), so without a trim the
# broker's RSS stays near its peak after a flood of large frames. After a connection that
# held at least TRIM_AFTER_BYTES goes away, malloc_trim(0) runs once, TRIM_DELAY_SECONDS
# later (a wave of closes costs one trim; a trim takes about a millisecond per 100 MB
# of free heap). Where the C library has no malloc_trim (musl, macOS) nothing is done.
# Invariant: at most one trim is scheduled at a time per process.
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
_scheduled: asyncio.TimerHandle | None = None


def available() -> bool:
    return _malloc_trim is not None


def after_free(nbytes: int) -> None:
    """`nbytes` were just given back: schedule a trim if that is enough to matter."""
    global _scheduled
    if _malloc_trim is None or nbytes < TRIM_AFTER_BYTES or _scheduled is not None:
        return
    _scheduled = asyncio.get_running_loop().call_later(TRIM_DELAY_SECONDS, trim_now)


def trim_now() -> bool:
    """Give the heaps' free memory back now; True when some was released."""
    global _scheduled
    _scheduled = None
    if _malloc_trim is None:
        return False
    return bool(_malloc_trim(0))
