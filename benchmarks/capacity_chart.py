"""One chart of a capacity.py sitting (its --json output): the maximum sustained rates, the
p99 latencies at fixed rates and the brokers' peak RSS, Apache Pulsar and letterbox side by side.

    .venv/bin/python benchmarks/capacity.py --json > capacity.json
    .venv/bin/python benchmarks/capacity_chart.py capacity.json docs/images/capacity.png
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

COLOURS = {"pulsar": "#888888", "letterbox": "#1f77b4"}
NAMES = {"pulsar": "Apache Pulsar", "letterbox": "letterbox"}


def _bars(ax: Any, groups: list[str], values: dict[str, list[float]], title: str, unit: str) -> None:
    width = 0.8 / max(len(values), 1)
    for i, (system, vals) in enumerate(values.items()):
        xs = [g + (i - (len(values) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, vals, width, label=NAMES.get(system, system), color=COLOURS.get(system))
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 10 else f"{v:.1f}" for v in vals], fontsize=7)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(unit)
    ax.legend(fontsize=7)


def draw(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in ("pulsar", "letterbox") if any(r["system"] == s for r in rows)]
    maxes = [r for r in rows if r["kind"] == "max"]
    rates = [r for r in rows if r["kind"] == "rate"]

    def cases(sel: list[dict[str, Any]]) -> list[str]:
        return list(dict.fromkeys(r["case"] for r in sel))

    def val(case: str, system: str, key: str) -> float:
        return next((float(r[key]) for r in rows if r["case"] == case and r["system"] == system), 0.0)

    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
    mc, rc = cases(maxes), cases(rates)
    short = [c.split(", ")[2] + ("\n" + c.split(", ")[1]) for c in mc]
    _bars(axes[0], short, {s: [val(c, s, "publish_msg_s") for c in mc] for s in systems},
          "maximum sustained publish rate\n(higher is better)", "msg/s")
    rshort = [c.split(", ")[0] for c in rc]
    _bars(axes[1], rshort, {s: [val(c, s, "publish_p99_ms") for c in rc] for s in systems},
          "p99 publish latency at a fixed rate\n(lower is better)", "ms")
    _bars(axes[2], rshort, {s: [val(c, s, "e2e_p99_ms") for c in rc] for s in systems},
          "p99 end-to-end latency at a fixed rate\n(lower is better)", "ms")
    _bars(axes[3], ["peak over the sitting"], {s: [max(float(r["peak_rss_mb"]) for r in rows if r["system"] == s)]
                                               for s in systems}, "broker peak RSS\n(lower is better)", "MB")
    fig.suptitle("letterbox beside Apache Pulsar under pulsar-perf (100 B, 1 producer, 1 topic, fsync before receipt)",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json_file", type=Path, help="capacity.py --json output")
    ap.add_argument("png", type=Path, help="where to write the chart")
    a = ap.parse_args()
    draw(json.loads(a.json_file.read_text())["rows"], a.png)
    print(a.png)


if __name__ == "__main__":
    main()
