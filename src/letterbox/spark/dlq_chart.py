# The DLQ report's PNG: one figure, readable at a glance. A text panel (total,
# time range, counts per reason), bars by reason, by source topic and by error
# (long labels wrapped to two lines and ellipsised), and a time panel whose
# buckets (a second .. a day) the report chose from the data's span, at least
# MIN_TIME_SLOTS bucket widths wide. Every bar carries its count, count axes
# have integer ticks, no text is under 10 pt. The layout is constrained: each
# margin is as wide as its labels need, so no band of the width stays empty.
#
# Invariant: `draw` returns exactly what it put on the image (the text panel's
# rows and each chart's labels and counts, after wrapping), so a test can
# compare the picture's content with the data without reading pixels.
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

FONT_PT = 11
SMALL_PT = 10  # the smallest text on the image
LABEL_WIDTH = 42  # characters per label line
LABEL_LINES = 2
MIN_TIME_SLOTS = 12  # the time chart is at least this many bucket widths wide


def short_label(text: str, width: int = LABEL_WIDTH, lines: int = LABEL_LINES) -> str:
    """`text` on at most `lines` lines of `width` characters, with "…" where it was cut."""
    flat = " ".join(str(text).split())
    wrapped = textwrap.wrap(flat, width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 1].rstrip() + "…"
    return "\n".join(wrapped)


def short_topic(name: str) -> str:
    """persistent://public/default/orders -> orders (other tenants/namespaces keep theirs)."""
    return name.removeprefix("persistent://public/default/").removeprefix("persistent://")


@dataclass
class Drawn:
    """What the PNG shows: the text panel's (label, value) rows and each chart's (label, count) bars."""

    summary: list[tuple[str, str]] = field(default_factory=list)
    charts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    size_px: tuple[int, int] = (0, 0)  # width, height


def draw(path: Path, title: str, summary: list[tuple[str, str]], charts: list[tuple[str, list[tuple[str, int]], bool]],
         time_chart: tuple[str, list[tuple[str, int]]]) -> Drawn:
    """charts: (title, [(label, count)], wrap labels) drawn as horizontal bars;
    time_chart: (title, [(bucket label, count)]) drawn as columns in time order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.ticker import MaxNLocator
    from matplotlib.transforms import Bbox

    drawn = Drawn(summary=list(summary))
    with plt.rc_context({"font.size": FONT_PT, "axes.titlesize": 13, "axes.titleweight": "bold",
                         "xtick.labelsize": SMALL_PT, "ytick.labelsize": SMALL_PT}):
        # constrained layout sizes each margin to its labels: no fixed left margin left empty
        fig = plt.figure(figsize=(16, 12), dpi=100, layout=ConstrainedLayoutEngine(
            w_pad=0.15, h_pad=0.15, hspace=0.06, wspace=0.04))
        grid = fig.add_gridspec(3, 2, height_ratios=[1, 1.15, 1.1])
        text_ax = fig.add_subplot(grid[0, 0])
        text_ax.axis("off")
        text_ax.set_title("summary", loc="left")
        table = text_ax.table(cellText=[[k, v] for k, v in summary] or [["", ""]], colWidths=[0.5, 0.5],
                              cellLoc="left", bbox=Bbox.from_bounds(0, 0, 1, 1), edges="horizontal")
        table.auto_set_font_size(False)
        table.set_fontsize(FONT_PT + 1)

        slots = [grid[0, 1], grid[1, 0], grid[1, 1]]
        for slot, (name, rows, wrap) in zip(slots, charts, strict=True):
            ax = fig.add_subplot(slot)
            labels = [short_label(label) if wrap else short_label(label, 50, 1) for label, _ in rows]
            counts = [int(c) for _, c in rows]
            drawn.charts[name] = list(zip(labels, counts, strict=True))
            bars = ax.barh(range(len(rows)), counts, color="#c44e52")
            ax.set_yticks(range(len(rows)), labels)
            ax.invert_yaxis()
            ax.bar_label(bars, fmt="%d", padding=3, fontsize=SMALL_PT)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlim(0, max(counts, default=1) * 1.15 + 0.5)
            ax.set_xlabel("dead letters")
            ax.set_title(name, loc="left")
            if not rows:
                ax.text(0.5, 0.5, "(none)", transform=ax.transAxes, ha="center")

        name, rows = time_chart
        ax = fig.add_subplot(grid[2, :])
        counts = [int(c) for _, c in rows]
        drawn.charts[name] = [(label, c) for label, c in rows]
        bars = ax.bar(range(len(rows)), counts, color="#4c72b0", width=0.8)
        ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], padding=2, fontsize=SMALL_PT)
        every = max(1, len(rows) // 24)  # at most ~24 time labels
        ticks = list(range(0, len(rows), every))
        ax.set_xticks(ticks, [rows[i][0] for i in ticks], rotation=30, ha="right")
        # a few buckets keep the width of one of MIN_TIME_SLOTS: never one bar across the chart
        pad = max(MIN_TIME_SLOTS - len(rows), 0) / 2  # centred
        ax.set_xlim(-0.5 - pad, len(rows) - 0.5 + pad)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, max(counts, default=1) * 1.15 + 0.5)
        ax.set_ylabel("dead letters")
        ax.set_title(name, loc="left")

        fig.suptitle(title, fontsize=15, fontweight="bold")
        fig.savefig(path)
        drawn.size_px = (int(fig.get_figwidth() * fig.dpi), int(fig.get_figheight() * fig.dpi))
        plt.close(fig)
    return drawn

