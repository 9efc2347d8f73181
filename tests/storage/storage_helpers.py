# Shared helpers for storage tests (pytest-asyncio is not installed: run coroutines with
# asyncio.run through `run_with_store`); for the kill -9 tests, `append_printing_receipts`
# (the child's loop) and `run_printing_child` (the parent's side).
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from letterbox.storage import ManagedLedger, Store, SyncMode
from letterbox.storage.ops import WriteOp

T = TypeVar("T")
SRC = Path(__file__).resolve().parents[2] / "src"
HERE = Path(__file__).resolve().parent


def submitted(led: ManagedLedger, ops: Sequence[WriteOp]) -> asyncio.Future[None]:
    """led.submit_appends(ops), its outcome as a future to await."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def then(exc: BaseException | None) -> None:
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(exc)

    led.submit_appends(ops, then)
    return fut


def run_with_store(
    path: Path,
    body: Callable[[Store], Awaitable[T]],
    sync: SyncMode = "full",
    cache_bytes: int = 64 * 1024 * 1024,
    large_payload_bytes: int | None = None,
) -> T:
    async def main() -> T:
        extra = {} if large_payload_bytes is None else {"large_payload_bytes": large_payload_bytes}
        store = Store(path, sync=sync, cache_bytes=cache_bytes, trim_interval=0.01, **extra)
        await store.start()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def payload(i: int, size: int = 32) -> bytes:
    b = f"entry-{i}-".encode()
    return (b * (size // len(b) + 1))[:size]


def run_printing_child(script: str, args: list[str], stop_after: int) -> tuple[list[int], int]:
    """Run `script` (python -c; this checkout's src, then this folder, first on its path, so
    it can use append_printing_receipts) with `args`; read the
    entry ids it prints, one a line, until `stop_after` of them or its end, then SIGKILL it.
    Returns (every id it printed, its return code)."""
    path = os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    printed: list[int] = []
    try:
        while len(printed) < stop_after:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(int(line))
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
    return printed + [int(x) for x in rest.split()], proc.returncode


def append_printing_receipts(path: Path, sync: SyncMode, data: Callable[[int], bytes], batch: int,
                             ack_each_batch: bool = False, **store_kwargs: Any) -> None:
    """A kill -9 test's child: append data(0), data(1), ... to ledger "crash" forever, `batch`
    appends at a time, printing each entry id as its append resolves (its receipt). Cursor
    "hold" never acks, so nothing is trimmed; with `ack_each_batch`, cursor "sub" acks each
    batch's first entry after the batch."""

    async def main() -> None:
        store = Store(path, sync=sync, **store_kwargs)
        await store.start()
        led = store.open_ledger("crash")
        cur = led.open_cursor("sub", "earliest") if ack_each_batch else None
        led.open_cursor("hold", "earliest")
        out = sys.stdout

        def done(fut: asyncio.Future[Any]) -> None:
            out.write(f"{fut.result().entry_id}\n")
            out.flush()

        i = 0
        while True:
            futs = []
            for _ in range(batch):
                f = led.append(data(i), 1, i, producer_name="p", sequence_id=i)
                f.add_done_callback(done)
                futs.append(f)
                i += 1
            await asyncio.gather(*futs)
            if cur is not None:
                cur.ack([i - batch])

    asyncio.run(main())
