# Shared helpers for storage tests (pytest-asyncio is not installed: run coroutines with
# asyncio.run through `run_with_store`).
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from letterbox.storage import Store, SyncMode

T = TypeVar("T")


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
