"""The running broker's collector settings (standalone.tune_gc): start-up objects are
frozen out of collections and young/full collections run far less often than Python's
defaults, which cost ~9 us of CPU per unbatched message (docs/benchmarks.md); the command
line loads a broker with the collector off and tune_gc turns it on."""
from __future__ import annotations

import gc

from letterbox.standalone import GC_THRESHOLDS, tune_gc


def test_tune_gc_freezes_start_up_objects_sets_thresholds_and_turns_the_collector_on() -> None:
    before = gc.get_threshold()
    gc.disable()  # as the command line starts a broker
    try:
        kept = [object() for _ in range(10)] + [[] for _ in range(10)]
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > 700 and GC_THRESHOLDS[0] * GC_THRESHOLDS[1] * GC_THRESHOLDS[2] > 700 * 10 * 10
        assert gc.get_freeze_count() >= len(kept) // 2
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*before)


def test_every_command_but_standalone_runs_with_the_collector_on() -> None:
    from click.testing import CliRunner

    from letterbox.cli import main

    gc.disable()  # as `python -m letterbox` starts
    try:
        result = CliRunner().invoke(main, ["tokens", "--help"])
        assert result.exit_code == 0, result.output
        assert gc.isenabled()
        CliRunner().invoke(main, ["standalone", "--sync", "sometimes"])  # refused, after the root command ran
        assert not gc.isenabled()
    finally:
        gc.enable()
