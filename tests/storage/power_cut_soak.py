"""Twenty power cuts (or --cuts) under the power_cut.py workload, one table row per restart.

    python -m tests.storage.power_cut_soak --cuts 20 --seed 1
"""
from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.storage.power_cut import Ledger, run_cycles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuts", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    logging.getLogger("pulsar-client").setLevel(logging.ERROR)
    print("| cut | workload ran (s) | receipted so far | acked | nacks | redrives | DLQ entries after the restart "
          "| receipted lost | dead letters duplicated or lost | other duplicates | violations so far |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.monotonic()

    pending: list[tuple[int, float, dict[str, int]]] = []  # the last cut, waiting for its restart's checks

    def report(n: int, ran: float, found: dict[str, Any], led: Ledger) -> None:
        """Called at cut n (with the checks of the restart after cut n-1) and once after the last restart."""
        if pending:
            cut, ran_before, at_cut = pending.pop()
            print(f"| {cut} | {ran_before:.1f} | {at_cut['receipted']:,} | {at_cut['acked']:,} | {at_cut['nacks']:,} | "
                  f"{at_cut['redrives']} | {found.get('in_dlq', 0):,} | {found.get('lost', 0)} | "
                  f"{found.get('bad_moves', 0)} | {found.get('duplicated', 0)} | {len(led.violations)} |", flush=True)
        pending.append((n, ran, {"receipted": len(led.receipted), "acked": len(led.acked_at), "nacks": led.nacks,
                                 "redrives": led.redrives}))

    led = run_cycles(Path(tempfile.mkdtemp(prefix="letterbox-power-")), args.cuts, args.seed, report)
    print(f"\n{args.cuts} cuts in {time.monotonic() - t0:.0f} s: {len(led.receipted):,} receipted, "
          f"{len(led.violations)} violations" + (f": {led.violations[:5]}" if led.violations else ""))


if __name__ == "__main__":
    main()
