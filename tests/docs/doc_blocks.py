"""The code blocks of README.md and docs/*.md, and how the doc tests treat each.

A fenced block tagged `python` or `sh` is runnable, and some test must run it, unless the line
right before its fence is `<!-- not run: REASON -->` (a synopsis with placeholders, a command
that starts a server for good or measures for minutes, ...). Other tags (`console` for a
transcript, `text`, `toml`, `json`) are shown, not run. A block inside an HTML comment that
starts `<!-- doc-test setup` is run but not shown (what a fragment needs first, e.g. a client).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = ("python", "sh")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: (.*?) -->\n$")
SETUP_START = "<!-- doc-test setup"


@dataclass(frozen=True)
class Block:
    doc: str  # README.md, docs/x.md
    line: int
    lang: str
    body: str
    not_run: str | None  # the reason, when marked
    setup: bool  # inside a doc-test setup comment

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE and self.not_run is None


def docs() -> list[str]:
    return ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def blocks(doc: str) -> list[Block]:
    text = (ROOT / doc).read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        marker = NOT_RUN.search(before[-300:])
        opened, closed = before.rfind(SETUP_START), before.rfind("-->")
        setup = opened != -1 and opened > closed
        out.append(Block(doc, before.count("\n") + 1, m.group(1), m.group(2),
                         marker.group(1).strip() if marker else None, setup))
    return out
