# PayloadLane: a submission holding a large append reaches the writer only once its payload
# files are durable (payload_files.py), so the SQLite group commit holds small rows only and a
# 100-byte SEND never waits behind the WAL write + fsync of a 5 MB entry of another topic.
#
# Routing (loop thread, submit()):
#   * a submission with an AppendOp of >= files.large_bytes goes to the lane thread;
#   * so does one that must stay behind a submission in the lane: it touches a ledger with a
#     submission in the lane, or it orders against every ledger (an op whose ledgers() is
#     None: metadata, probes, barriers such as store.barrier()) while the lane holds
#     anything; while such a barrier is in the lane, every submission follows it;
#   * everything else goes straight to the writer's queue.
# The lane thread takes what is queued, writes and fsyncs each large payload to its own file,
# fsyncs the directory once, then puts the batch on the writer's queue in order.
#
# Invariants:
#   * per ledger, and across barriers, the writer receives submissions in submit() order, so a
#     ledger's entries still commit in id order and Store.barrier() still means "everything
#     before is durable";
#   * a row names a payload file only after the file is durable (AppendOp.payload_ref is set by
#     this thread before the submission is forwarded; the writer only reads it);
#   * a payload that cannot be written fails its submission with a StorageFault, which the
#     writer reports without running it and fences the ledger, as for a failed commit (any
#     exception does: the thread never stops with submissions held);
#   * the counters of what the lane holds change under `_lock`; only the loop thread adds to
#     them, so an unlocked `_held == 0` read means nothing is in the lane.
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from .errors import StorageFault
from .ops import AppendOp, WriteOp
from .payload_files import PayloadFiles

log = logging.getLogger(__name__)


class LaneSubmission(Protocol):
    """What the lane uses of a writer Submission (writer.py)."""

    ops: Sequence[WriteOp]
    nbytes: int
    error: BaseException | None


S = TypeVar("S", bound=LaneSubmission)


class _Held(Generic[S]):
    __slots__ = ("barrier", "large", "ledgers", "sub")

    def __init__(self, sub: S, large: list[AppendOp], ledgers: set[int], barrier: bool) -> None:
        self.sub = sub
        self.large = large
        self.ledgers = ledgers
        self.barrier = barrier


class PayloadLane(Generic[S]):
    def __init__(self, files: PayloadFiles, forward: Callable[[S], None]) -> None:
        self.files = files
        self.threshold = files.large_bytes
        self._forward = forward
        self._queue: queue.SimpleQueue[_Held[S] | list[str] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._held = 0
        self._held_ledgers: dict[int, int] = {}
        self._held_barriers = 0
        self._thread: threading.Thread | None = None
        self.payloads_written = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="letterbox-payload-lane", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Forward everything queued, then end the thread (blocking: call off the loop)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def remove_later(self, names: list[str]) -> None:
        """Unlink payload files whose rows were deleted by a commit (off the writer thread)."""
        self._queue.put(names)

    # ---- loop thread ----

    def submit(self, sub: S) -> None:
        if sub.nbytes < self.threshold and not self._held:
            self._forward(sub)
            return
        large = [op for op in sub.ops if type(op) is AppendOp and op.nbytes >= self.threshold]
        ledgers: set[int] = set()
        barrier = not sub.ops
        for op in sub.ops:
            scope = op.ledgers()
            if scope is None:
                barrier = True
            else:
                ledgers.update(scope)
        with self._lock:
            behind = self._held and (barrier or self._held_barriers
                                     or any(lid in self._held_ledgers for lid in ledgers))
            if not large and not behind:
                self._forward(sub)
                return
            self._held += 1
            self._held_barriers += barrier
            for lid in ledgers:
                self._held_ledgers[lid] = self._held_ledgers.get(lid, 0) + 1
        self._queue.put(_Held(sub, large, ledgers, barrier))

    # ---- lane thread ----

    def _run(self) -> None:
        stop = False
        while not stop:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batch: list[_Held[S]] = []
            removals: list[str] = []
            for item in items:
                if item is None:
                    stop = True
                elif isinstance(item, list):
                    removals.extend(item)
                else:
                    batch.append(item)
            self._write(batch)
            with self._lock:
                for held in batch:
                    self._forward(held.sub)
                    self._held -= 1
                    self._held_barriers -= held.barrier
                    for lid in held.ledgers:
                        left = self._held_ledgers.pop(lid) - 1
                        if left:
                            self._held_ledgers[lid] = left
            if removals:
                try:
                    self.files.remove(removals)
                except Exception as exc:  # left for the sweep at the next start
                    log.warning("could not remove payload files: %s", exc)

    def _write(self, batch: list[_Held[S]]) -> None:
        written: list[_Held[S]] = []
        for held in batch:
            if not held.large or held.sub.error is not None:
                continue
            try:
                for op in held.large:
                    op.payload_ref = self.files.new_name(op.ledger_id, op.entry.position.entry_id)
                    self.files.write(op.payload_ref, op.entry.data)
                    self.payloads_written += 1
                    held.sub.nbytes -= op.nbytes  # no longer part of the group commit
            except Exception as exc:  # OSError, or anything else: the submission fails, never hangs
                held.sub.error = _fault("cannot write a payload file", exc)
                continue
            written.append(held)
        if written:
            try:
                self.files.sync_directory()
            except Exception as exc:
                for held in written:
                    held.sub.error = _fault("cannot sync the payload directory", exc)


def _fault(what: str, exc: Exception) -> StorageFault:
    fault = StorageFault(f"{what}: {exc}")
    fault.__cause__ = exc
    return fault
