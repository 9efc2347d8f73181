"""The running broker's collector settings (standalone.tune_gc): start-up objects are
frozen out of collections and young/full collections run far less often than Python's
defaults, which cost ~9 us of CPU per unbatched message (docs/benchmarks.md)."""
from __future__ import annotations

import gc

from letterbox.standalone import GC_THRESHOLDS, tune_gc


def test_tune_gc_freezes_start_up_objects_and_sets_thresholds() -> None:
    before = gc.get_threshold()
    try:
        kept = [object() for _ in range(10)] + [[] for _ in range(10)]
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > 700 and GC_THRESHOLDS[0] * GC_THRESHOLDS[1] * GC_THRESHOLDS[2] > 700 * 10 * 10
        assert gc.get_freeze_count() >= len(kept) // 2
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
