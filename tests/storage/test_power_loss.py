"""Power cuts at random moments of a workload of producing, acking, nacking, broker-side
dead-lettering and redrives, with the data dir on a file system that drops every write not
fsynced (volatile_fs.py, power_cut.py says what is checked after each restart). Three cuts
here; tests/storage/power_cut_soak.py runs twenty and prints a table per run."""
from __future__ import annotations

from pathlib import Path

from tests.storage.power_cut import run_cycles


def test_three_power_cuts_lose_no_receipted_message_and_no_dead_letter(tmp_path: Path) -> None:
    led = run_cycles(tmp_path, cuts=3, seed=7)
    assert not led.violations, led.violations
    assert len(led.receipted) > 300 and led.nacks > 0  # the workload ran
