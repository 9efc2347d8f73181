# Shared helpers for storage tests (pytest-asyncio is not installed: run coroutines with
# asyncio.run through `run_with_store`); `run_printing_child` for the kill -9 tests.
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from letterbox.storage import Store, SyncMode

T = TypeVar("T")
SRC = Path(__file__).resolve().parents[2] / "src"


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
    """Run `script` (python -c, this checkout's src first on its path) with `args`; read the
    entry ids it prints, one a line, until `stop_after` of them or its end, then SIGKILL it.
    Returns (every id it printed, its return code)."""
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
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
