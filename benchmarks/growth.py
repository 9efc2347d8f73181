"""letterbox beside Apache Pulsar as the work grows: five curves, one command.

    .venv/bin/python benchmarks/growth.py --json-out growth.json --charts docs/images   # or: make bench-growth
    .venv/bin/python benchmarks/growth.py --plot-only growth.json --charts docs/images  # redraw, no run

Each point runs on a freshly started system with a fresh data directory (so a point's RSS is not
the sum of the points before it), one system at a time, with the same durability as capacity.py:
fsync before the receipt (letterbox `--sync full`; Apache Pulsar 4.0.8 standalone with
journalSyncData=true, conformance/pulsar/standalone.conf), both on free loopback ports.

Load generator: pulsar-perf (the reference distribution's Java tool, as capacity.py runs it) for
the first four curves, identically for both brokers: one JVM producing (batched, its 1 ms
window, at most 1000 messages outstanding over all its producers) and one JVM consuming (one
Exclusive consumer per topic and subscription, from Earliest, every message acknowledged), both
over one connection. Times are taken from pulsar-perf's own log lines: from the producer's
"Created N producers" (every producer exists: JVM start-up and creating them excluded) to the
consumer's "DONE" (its last receipt); broker CPU over the same span. A point that takes longer
than --timeout is reported as not finished.

  topics   T topics, one producer and one consumer each, --topic-messages in all (each producer
           sends its T-th share, at most 1000 // T outstanding), --message-size bytes: end-to-end
           msg/s, broker peak RSS, broker CPU per message; and apart, the seconds pulsar-perf
           took to create the T producers and to subscribe the T consumers
  subs     one topic, S subscriptions with a consumer each, --fanout-messages produced:
           delivered msg/s (messages x S / seconds), peak RSS, CPU per delivery
  backlog  B messages produced batched with a subscription but no consumer, then read from
           Earliest by one consumer: read msg/s (its subscribe to its last receipt), peak RSS
           and CPU during the read, `du` of the data directory after producing per stored message
           (and its growth since before producing: Pulsar's bookie preallocates its files)
  size     one topic, --size-messages messages (at most --size-mb MB, at least
           --size-min-messages) of each size: publish MB/s and msg/s, end-to-end MB/s and msg/s
  delayed  benchmarks/delayed_memory.py's measurement (official Python client, unbatched, 1000
           in flight): a Shared consumer subscribed, D messages due --delay-s ahead, then broker
           RSS growth per message once all are stored, the subscription's msgDelayed (held) is
           still and the CPU is quiet. Pulsar indexes at most 50,000 messages due in order and
           reads the rest when due (held < D). A JVM's RSS is heap touched, not live objects:
           Pulsar's tracker itself needs ~24 B a message

The machine's pace is timed before and after each system (capacity.py's CPU probe). Writes
--json-out, a Markdown table per curve, and with --charts a PNG per curve (growth-<curve>.png).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from _growth_curves import CURVES
from _systems import fresh
from capacity import cpu_probe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from conformance import reference  # noqa: E402  (the repository's own reference-broker module)

HIGHER, LOWER = "higher is better", "lower is better"
# curve: x axis label, the charted figures (key, axis label, which way is better), more table columns
SPEC: dict[str, tuple[str, list[tuple[str, str, str]], list[str]]] = {
    "topics": ("topics (one producer and one consumer each)", [
        ("e2e_msg_s", "end-to-end msg/s (all topics)", HIGHER), ("peak_rss_mb", "broker peak RSS (MB)", LOWER),
        ("broker_cpu_us_per_msg", "broker CPU per message (µs)", LOWER)],
        ["messages_per_topic", "publish_msg_s", "create_s", "subscribe_s"]),
    "subs": ("subscriptions on one topic (a consumer each)", [
        ("e2e_msg_s", "delivered msg/s (messages x subscriptions / s)", HIGHER),
        ("peak_rss_mb", "broker peak RSS (MB)", LOWER),
        ("broker_cpu_us_per_msg", "broker CPU per delivery (µs)", LOWER)], ["messages", "publish_msg_s"]),
    "backlog": ("backlog read from Earliest (messages)", [
        ("read_msg_s", "read msg/s (one consumer)", HIGHER),
        ("peak_rss_mb", "broker peak RSS during the read (MB)", LOWER),
        ("disk_bytes_per_msg", "du of the data directory per message (bytes)", LOWER)],
        ["stored", "disk_mb", "disk_growth_bytes_per_msg", "produce_msg_s", "rss_before_read_mb",
         "broker_cpu_us_per_msg"]),
    "size": ("message size (bytes)", [
        ("publish_mb_s", "publish MB/s", HIGHER), ("e2e_mb_s", "end-to-end MB/s", HIGHER),
        ("publish_msg_s", "publish msg/s", HIGHER)], ["messages", "e2e_msg_s", "peak_rss_mb"]),
    "delayed": ("delayed messages waiting (due in an hour)", [
        ("rss_bytes_per_msg", "broker RSS growth per delayed message (bytes)", LOWER),
        ("rss_after_mb", "broker RSS holding them (MB)", LOWER)],
        ["stored", "held", "rss_before_mb", "rss_growth_mb", "produce_msg_s", "settled_s", "cpu_quiet"]),
}
# each curve's points option, its default and what a point is
POINTS = {"topics": ("--topics", "1,10,100,1000", "topic counts (up to 10000)"),
          "subs": ("--subs", "1,10,50,100", "subscription counts on one topic"),
          "backlog": ("--backlog", "10000,100000,1000000", "backlog sizes (up to 10000000)"),
          "size": ("--sizes", "100,1024,10240,102400,1048576", "message sizes in bytes"),
          "delayed": ("--delayed", "10000,100000,1000000", "delayed message counts (up to 10000000)")}
LABEL = {"letterbox": "letterbox", "pulsar": "Apache Pulsar 4.0.8"}
STYLE = {"letterbox": ("tab:blue", "o"), "pulsar": ("tab:orange", "s")}


def run_point(name: str, curve: str, x: int, a: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"curve": curve, "system": name, "x": x}
    t0 = time.monotonic()
    with fresh(name, f"growth-{name}") as system:
        try:
            system.start()
            row.update(CURVES[curve](system, x, a))
        except Exception as e:  # one failed point is reported, the others still run
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
            row["traceback"] = traceback.format_exc()[-3000:]
    row["point_seconds"] = round(time.monotonic() - t0, 1)
    return row


def fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v).lower() if v is not None else "—"
    if isinstance(v, int | float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}".rstrip("0").rstrip(".")
    return str(v)


def table(curve: str, rows: list[dict[str, Any]]) -> str:
    xlabel, charted, extra = SPEC[curve]
    keys = [k for k, _, _ in charted] + extra
    lines = [f"| {xlabel} | system | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for r in sorted(rows, key=lambda r: (r["x"], r["system"])):
        cells = [fmt(r.get(k)) for k in keys]
        if "error" in r:
            first = r["error"].splitlines()[0].removeprefix("RuntimeError: ").split(";")[0][:120]
            cells = [first if first.startswith("did not finish") else f"error: {first}"] + [""] * (len(keys) - 1)
        lines.append(f"| {r['x']:,} | {LABEL[r['system']]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _unfinished(row: dict[str, Any]) -> bool:
    """A point that outlasted --timeout (its error says so)."""
    return str(row.get("error", "")).removeprefix("RuntimeError: ").startswith("did not finish")


def chart(curve: str, rows: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    xlabel, charted, _ = SPEC[curve]
    fig, axes = plt.subplots(1, len(charted), figsize=(5.2 * len(charted), 4.2), squeeze=False)
    xs_all = [r["x"] for r in rows]
    for ax, (key, ylabel, better) in zip(axes[0], charted, strict=True):
        for name in ("letterbox", "pulsar"):
            pts = sorted((r["x"], r[key]) for r in rows
                         if r["system"] == name and isinstance(r.get(key), int | float))
            if pts:
                color, marker = STYLE[name]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=LABEL[name])
            late = [r["x"] for r in rows if r["system"] == name and _unfinished(r)]
            if late:  # a point past --timeout: a cross on the axis, named in the legend
                color, _ = STYLE[name]
                ax.scatter(late, [0] * len(late), marker="x", s=80, color=color, clip_on=False, zorder=3,
                           label=f"{LABEL[name]}: did not finish")
        if xs_all and max(xs_all) / max(min(xs_all), 1) >= 10:  # the points span decades
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{ylabel}\n({better})", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"Cost as work grows: {curve}", fontweight="bold")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"growth-{curve}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(result: dict[str, Any], charts: Path | None) -> None:
    print(f"\n{json.dumps(result['meta'])}")
    for curve in SPEC:
        rows = [r for r in result["points"] if r["curve"] == curve]
        if rows:
            print(f"\n### {curve}\n\n{table(curve, rows)}")
            if charts:
                print(f"\n{chart(curve, rows, charts)}")


def ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="letterbox,pulsar", help="comma-separated: letterbox, pulsar")
    ap.add_argument("--curves", default=",".join(SPEC), help="comma-separated: " + ", ".join(SPEC))
    for curve, (option, default, what) in POINTS.items():
        ap.add_argument(option, dest=curve, default=default, help=f"points of the {curve} curve: {what}")
    ap.add_argument("--topic-messages", type=int, default=200_000, help="messages in all, split among the topics")
    ap.add_argument("--fanout-messages", type=int, default=20_000, help="messages produced to the fan-out topic")
    ap.add_argument("--size-messages", type=int, default=100_000, help="messages per size ...")
    ap.add_argument("--size-mb", type=int, default=500, help="... but at most this many MB ...")
    ap.add_argument("--size-min-messages", type=int, default=100, help="... and at least this many messages")
    ap.add_argument("--message-size", type=int, default=100, help="payload bytes outside the size curve")
    ap.add_argument("--delay-s", type=int, default=3600, help="how far ahead delayed messages are due")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one step of a point may take")
    ap.add_argument("--json-out", type=Path, help="write every point and the machine's details here")
    ap.add_argument("--charts", type=Path, help="write growth-<curve>.png into this directory")
    ap.add_argument("--plot-only", type=Path, nargs="+", metavar="FILE.json",
                    help="redraw tables and charts from saved runs (several: their points together)")
    a = ap.parse_args()
    if a.plot_only:
        runs = [json.loads(p.read_text()) for p in a.plot_only]
        report({"meta": [r["meta"] for r in runs] if len(runs) > 1 else runs[0]["meta"],
                "points": [p for r in runs for p in r["points"]]}, a.charts)
        return
    systems, curves = [s for s in a.systems.split(",") if s], [c for c in a.curves.split(",") if c]
    if bad := [s for s in systems if s not in LABEL] + [c for c in curves if c not in SPEC]:
        sys.exit(f"unknown system or curve: {', '.join(bad)}")
    points = {curve: ints(getattr(a, curve)) for curve in POINTS}
    reference.fetch()  # pulsar-perf comes with the reference broker's jars, whichever systems run
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
                            "pulsar_version": reference.pulsar_version(), "load_average": [os.getloadavg()[0]],
                            "cpu_probe_s": [cpu_probe()], "seconds": {},
                            "options": {k: str(v) for k, v in vars(a).items()}}
    rows: list[dict[str, Any]] = []
    for name in systems:
        t0 = time.monotonic()
        for curve in curves:
            for x in points[curve]:
                r = run_point(name, curve, x, a)
                rows.append(r)
                print(f"  {name:<9} {curve:<7} {x:>9,}  {r.get('error') or json.dumps(r)}"[:400], flush=True)
                if a.json_out:  # kept up to date: a long run that stops still leaves its points
                    a.json_out.write_text(json.dumps({"meta": meta, "points": rows}, indent=1))
        meta["seconds"][name] = round(time.monotonic() - t0)
        meta["cpu_probe_s"].append(cpu_probe())
        meta["load_average"].append(os.getloadavg()[0])
    result = {"meta": meta, "points": rows}
    if a.json_out:
        a.json_out.write_text(json.dumps(result, indent=1))
    report(result, a.charts)


if __name__ == "__main__":
    main()
