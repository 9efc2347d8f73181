"""Leak checks for the compiled codecs: how many bytes a loop of calls leaves allocated."""
from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable


def bytes_left_behind(run: Callable[[], None]) -> int:
    """Run `run` once to warm caches (small ints, pytest's), then again under tracemalloc: the
    bytes still allocated after the second run (a leaked object per call shows as megabytes)."""
    run()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run()
        gc.collect()
        return int(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
