"""letterbox, Apache Pulsar and NATS JetStream in one sitting, checked against the performance
targets, one command:

    .venv/bin/python benchmarks/sitting.py             # or: make bench-sitting  (about 35 min)
    .venv/bin/python benchmarks/sitting.py --quick     # a smoke run of the same steps (about 8 min)
    .venv/bin/python benchmarks/sitting.py --from build/sitting   # the table again from saved runs

Runs, one after another on this machine, each system started fresh by the script it runs:

  peers       benchmarks/peers.py: the official Python client, W1 batched / unbatched and W2
              (every 10th message always fails) on Apache Pulsar, NATS JetStream and letterbox
  capacity    benchmarks/capacity.py: pulsar-perf as the load, 100 B, one producer, one topic:
              the maximum sustained rate batched and unbatched, and a fixed 5,000 msg/s (latency,
              peak RSS), with each system's start to first receipt
  failure     benchmarks/failure_throughput.py: the Java client's load, redeliveries, dead-letter
              moves and redrive per second, letterbox broker-side beside Pulsar's client policy
  go          (only when asked: --steps ...,go) benchmarks/capacity_go.py: the Go client's perf
              tool as a second opinion on the maximum batched rate

each with --runs runs (figures are medians), and saves each script's JSON in --out. Then prints
one table: each target, the two figures, their ratio and whether it is met. The machine's pace
(CPU probe) and load are in each saved file's "meta".
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STEPS = ("peers", "capacity", "failure", "go")
DEFAULT_STEPS = ("peers", "capacity", "failure")
CAPACITY_CASES = ["--cases", "max,rate", "--sizes", "100", "--producers", "1", "--partitions", "0",
                  "--rates", "5000"]


def commands(a: argparse.Namespace) -> dict[str, list[str]]:
    runs = ["--runs", str(a.runs)]
    return {
        "peers": ["peers.py", "--json", *runs, *(["--w1", "20000", "--w2", "2000"] if a.quick else [])],
        "capacity": ["capacity.py", "--json", *runs, *CAPACITY_CASES, "--duration", "30"],
        "failure": ["failure_throughput.py", "--json", *runs, "--messages", "2000" if a.quick else str(a.messages)],
        "go": ["capacity_go.py", "--json", *runs, "--duration", "30" if a.quick else "40"],
    }


def run_step(step: str, argv: list[str], out: Path) -> dict[str, Any]:
    """One script, its progress on our stderr, its JSON saved as out/<step>.json."""
    t0 = time.monotonic()
    print(f"== {step}: {' '.join(argv)}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]], cwd=HERE.parent, stdout=subprocess.PIPE,
                          text=True, check=False)
    text = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if not text.startswith("{"):
        sys.exit(f"{step} printed no JSON (exit {done.returncode}); see its output above")
    (out / f"{step}.json").write_text(text + "\n")
    print(f"== {step}: {time.monotonic() - t0:.0f} s, exit {done.returncode}", file=sys.stderr, flush=True)
    result: dict[str, Any] = json.loads(text)
    return result


def _row(rows: list[dict[str, Any]], **match: str) -> dict[str, Any] | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _fig(row: dict[str, Any] | None, key: str) -> float | None:
    return None if row is None else row.get(key)


def targets(res: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, float | None, str]]:
    """(target, letterbox figure, peer figure, ratio, met/missed) for each target with both figures."""
    out: list[tuple[str, str, str, float | None, str]] = []

    def add(name: str, mine: float | None, theirs: float | None, unit: str, want: float, higher: bool,
            extra: bool = True) -> None:
        if mine is None or theirs is None:
            out.append((name, "—" if mine is None else f"{_num(mine)} {unit}",
                        "—" if theirs is None else f"{_num(theirs)} {unit}", None, "not measured"))
            return
        ratio = mine / theirs if theirs else float("inf")
        met = (ratio >= want if higher else ratio <= want) and extra
        out.append((name, f"{_num(mine)} {unit}", f"{_num(theirs)} {unit}", ratio, "met" if met else "missed"))

    cap = res.get("capacity")
    if cap:
        rows, meta = cap["rows"], cap["meta"]
        for batched in ("unbatched", "batched"):
            label = f"max, 100 B, {batched}, 1 producer, 1 topic"
            lb, pu = _row(rows, case=label, system="letterbox"), _row(rows, case=label, system="pulsar")
            add(f"pulsar-perf max sustained rate, {batched} (≥ 1.0 x Pulsar)", _fig(lb, "publish_msg_s"),
                _fig(pu, "publish_msg_s"), "msg/s", 1.0, True)
        label = "5,000 msg/s, 100 B, unbatched, 1 producer, 1 topic"
        lb, pu = _row(rows, case=label, system="letterbox"), _row(rows, case=label, system="pulsar")
        for key, what in (("publish_p99_ms", "p99 publish"), ("e2e_p99_ms", "p99 end to end")):
            add(f"{what} at 5,000 msg/s (≤ 0.5 x Pulsar)", _fig(lb, key), _fig(pu, key), "ms", 0.5, False)
        add("peak RSS at 5,000 msg/s (≤ 0.2 x Pulsar)", _fig(lb, "peak_rss_mb"), _fig(pu, "peak_rss_mb"), "MB",
            0.2, False)
        add("start to first receipt (≤ 0.05 x Pulsar)", meta.get("letterbox_first_receipt_s"),
            meta.get("pulsar_first_receipt_s"), "s", 0.05, False)
    fail = res.get("failure")
    if fail:
        lb, pu = _row(fail["rows"], system="letterbox"), _row(fail["rows"], system="pulsar")
        exact = lb is not None and lb["exact_runs"] == lb["runs"]
        add("dead-letter moves/s (≥ 2 x Pulsar, exact)", _fig(lb, "moves_per_s"), _fig(pu, "moves_per_s"),
            "msg/s", 2.0, True, exact)
    go = res.get("go")
    if go:
        lb, pu = _row(go["rows"], system="letterbox"), _row(go["rows"], system="pulsar")
        add("Go perf tool max rate, batched (second opinion, ≥ 1.0 x Pulsar)", _fig(lb, "publish_msg_s"),
            _fig(pu, "publish_msg_s"), "msg/s", 1.0, True)
    peers = res.get("peers")
    if peers:
        rows = peers["rows"]
        for workload, want in (("W1 unbatched", 1.0), ("W1 batched", 1.3)):
            lb, na = _row(rows, workload=workload, system="letterbox"), _row(rows, workload=workload, system="nats")
            add(f"{workload}, official Python client (≥ {want} x NATS)", _fig(lb, "msg_per_s"),
                _fig(na, "msg_per_s"), "msg/s", want, True)
        lb, na = _row(rows, workload="W2 broker DLQ", system="letterbox"), _row(rows, workload="W2 broker DLQ",
                                                                                 system="nats")
        add("W2 broker-side DLQ time (≤ 0.8 x NATS, exact)", _fig(lb, "seconds"), _fig(na, "seconds"), "s", 0.8,
            False, lb is not None and bool(lb["exact"]))
    return out


def table(rows: list[tuple[str, str, str, float | None, str]]) -> str:
    lines = ["| target | letterbox | Apache Pulsar / NATS | ratio | result |", "|---|---|---|---|---|"]
    for name, mine, theirs, ratio, result in rows:
        lines.append(f"| {name} | {mine} | {theirs} | {'—' if ratio is None else f'{ratio:.2f} x'} | {result} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default=",".join(DEFAULT_STEPS),
                    help=f"comma-separated, in this order: {', '.join(STEPS)} (go: `make bench-go` first)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=50_000, help="N of the failure step")
    ap.add_argument("--quick", action="store_true", help="small figures and one run: checks the steps work")
    ap.add_argument("--out", type=Path, default=Path("build/sitting"), help="where each step's JSON is saved")
    ap.add_argument("--from", dest="from_dir", type=Path, help="print the table from a saved sitting; run nothing")
    a = ap.parse_args()
    if a.quick:
        a.runs = 1
    steps = [s for s in a.steps.split(",") if s]
    if bad := [s for s in steps if s not in STEPS]:
        sys.exit(f"unknown step: {', '.join(bad)} (steps: {', '.join(STEPS)})")
    res: dict[str, dict[str, Any]] = {}
    if a.from_dir:
        for step in STEPS:
            if (a.from_dir / f"{step}.json").exists():
                res[step] = json.loads((a.from_dir / f"{step}.json").read_text())
    else:
        a.out.mkdir(parents=True, exist_ok=True)
        argv = commands(a)
        for step in steps:
            res[step] = run_step(step, argv[step], a.out)
    print(table(targets(res)))
    dates = {step: r["meta"].get("date") for step, r in res.items()}
    probes = {step: r["meta"].get("cpu_probe_s") for step, r in res.items()}
    print(f"\nsitting: {dates}; CPU probe s (before, and after each system): {probes}")


if __name__ == "__main__":
    main()
