# Who may work on a dead letter topic now (redrive.py, dead_letter_purge.py):
#   * the per-DLQ lock (dlq_lock): each redrive chunk's selection and commit, each
#     counting scan and each purge hold it, so a redrive and a purge never pick the
#     same messages. A lock lives only while someone holds or waits for it.
#   * the running redrive (claim / release): one redrive per DLQ at a time, with
#     the event that cancels it (cancel_redrive) before its next chunk.
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from letterbox.errors import LetterboxError, ServerError

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic

_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # DLQ name -> (lock, holders + waiters)
_running: dict[str, asyncio.Event] = {}  # DLQ name -> set to cancel its redrive


class RedriveRunning(LetterboxError):
    code = ServerError.NotAllowedError


@contextlib.asynccontextmanager
async def dlq_lock(topic: MovedTopic) -> AsyncIterator[None]:
    """Hold the DLQ's lock; the lock is forgotten once nobody holds or waits for it."""
    key = str(topic.name)
    lock, users = _locks.get(key) or (asyncio.Lock(), 0)
    _locks[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _locks[key]
        if users <= 1:
            del _locks[key]
        else:
            _locks[key] = (lock, users - 1)


def redrive_running(dlq_name: str) -> bool:
    """Whether a redrive of the dead letter topic `dlq_name` runs now (the ordered
    quarantine, key_quarantine.py, keeps a redriven key's new messages behind it meanwhile)."""
    return dlq_name in _running


def cancel_redrive(topic: MovedTopic) -> bool:
    """Ask the redrive running on `topic` to stop; False when none runs."""
    stop = _running.get(str(topic.name))
    if stop is None:
        return False
    stop.set()
    return True


def claim(topic: MovedTopic) -> asyncio.Event:
    """Become THE redrive of `topic` (RedriveRunning if one runs): its stop event."""
    key = str(topic.name)
    if key in _running:
        raise RedriveRunning(f"a redrive of {topic.name} is already running; cancel it first")
    stop = _running[key] = asyncio.Event()
    return stop


def release(topic: MovedTopic) -> None:
    _running.pop(str(topic.name), None)
