"""The results table of a conformance run: build/conformance/results.jsonl (one verdict per
scenario and client, written by tests/conformance) rendered as docs/conformance-results.md, one
row per scenario and a column per client. `make conformance` runs it after the scenarios.

    python -m conformance.table [results.jsonl] [out.md]
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "conformance" / "results.jsonl"
OUT = ROOT / "docs" / "conformance-results.md"
CLIENTS = ("python", "java", "go", "pulsar-admin", "pulsar-client")
MARK = {"identical": "same", "deliberate": "deliberate", "differs": "**differs**", "error": "**error**"}


def render(rows: list[dict[str, str]], version: str) -> str:
    verdicts: dict[str, dict[str, str]] = {}
    for row in rows:
        verdicts.setdefault(row["scenario"], {})[row["client"]] = row["verdict"]
    clients = [c for c in CLIENTS if any(c in v for v in verdicts.values())]
    counts = Counter((r["client"], r["verdict"]) for r in rows)
    lines = [
        "# Conformance results: letterbox beside Apache Pulsar",
        "",
        f"Each scenario ran through the official client named in the column against Apache Pulsar "
        f"{version} standalone and letterbox, and what the client saw was compared "
        "(`make conformance`; how it works: [compatibility.md](compatibility.md#how-it-is-measured)).",
        "**same**: identical records; **deliberate**: a listed difference, pinned on both sides "
        "([compatibility.md](compatibility.md#deliberate-differences)).",
        "",
        "| client | scenarios | same | deliberate | differs | error |",
        "|---|---|---|---|---|---|",
    ]
    for c in clients:
        n = sum(v for (cl, _), v in counts.items() if cl == c)
        lines.append(f"| {c} | {n} | {counts[(c, 'identical')]} | {counts[(c, 'deliberate')]} | "
                     f"{counts[(c, 'differs')]} | {counts[(c, 'error')]} |")
    lines += ["", "| scenario | " + " | ".join(clients) + " |", "|---" * (len(clients) + 1) + "|"]
    for name in sorted(verdicts):
        cells = [MARK.get(verdicts[name].get(c, ""), "") for c in clients]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from conformance.reference import pulsar_version

    src = Path(argv[0]) if argv else RESULTS
    out = Path(argv[1]) if len(argv) > 1 else OUT
    if not src.exists():
        print(f"error: no results at {src}: run the scenarios first (make conformance)", file=sys.stderr)
        return 1
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    out.write_text(render(rows, pulsar_version()))
    print(f"{out}: {len(rows)} verdicts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
