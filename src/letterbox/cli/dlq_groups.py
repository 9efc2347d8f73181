# `letterbox dlq groups` and `letterbox dlq export`: a dead letter topic's failure groups
# (GET {dlq}/letterbox/deadLetters/groups) and its dead letters written out as JSON lines,
# all or one group's (GET {dlq}/letterbox/deadLetters?group=G), one listing call.
# The commands join the `dlq` group of cli/dlq.py when this module is imported (cli/__init__).
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from letterbox.cli.dlq import dlq
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, format_epoch_ms, table
from letterbox.cli.params import FAILURE_GROUP, TOPIC, topic_path
from letterbox.topic_name import TopicName

EXPORT_LIMIT = 10_000  # the listing's largest answer
BAR_WIDTH = 24


def _bars(counts: list[int]) -> str:
    """A group's histogram as a row of block characters (one per bucket)."""
    top = max(counts, default=0)
    if not top:
        return ""
    marks = " ▁▂▃▄▅▆▇█"
    return "".join(marks[0 if not n else max(1, round(n / top * 8))] for n in counts[-BAR_WIDTH:])


@admin_command(dlq, "groups", "dlq_topic", TOPIC)
def dlq_groups(a: AdminContext, dlq_topic: TopicName) -> None:
    """List the failure groups of DLQ_TOPIC, largest first: reason, error class, the error
    text with numbers, ids and quoted values normalised away, count, first and last time.

    A group's fingerprint is what --group takes in peek, redrive, purge and export.
    """
    answer: dict[str, Any] = a.client.get_json(topic_path(dlq_topic) + "/letterbox/deadLetters/groups") or {}
    if a.json:
        echo_json(answer)
        return
    groups = answer.get("groups") or []
    if not groups:
        click.echo(f"no dead letters in {dlq_topic}")
        return
    table(["fingerprint", "count", "reason", "error class", "error", "first", "last", "over time"],
          [[g["fingerprint"], g["count"], g["reason"], g.get("errorClass") or "-", g.get("pattern") or "-",
            format_epoch_ms(g.get("firstDeadLetteredAt")), format_epoch_ms(g.get("lastDeadLetteredAt")),
            _bars(g.get("histogram") or [])] for g in groups])


@admin_command(dlq, "export", "dlq_topic", TOPIC)
@click.option("--group", "-g", type=FAILURE_GROUP, help="Only this failure group (`dlq groups`).")
@click.option("--limit", "-n", type=click.IntRange(1, EXPORT_LIMIT), default=EXPORT_LIMIT, show_default=True,
              help="At most this many dead letters (oldest first).")
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write to this file instead of standard output.")
def dlq_export(a: AdminContext, dlq_topic: TopicName, group: str | None, limit: int, path: Path | None) -> None:
    """Write dead letters of DLQ_TOPIC as JSON lines: message id, key, properties, times and
    payload (text and base64), as the admin API lists them."""
    query = {"limit": str(limit)}
    if group:
        query["group"] = group
    letters: list[dict[str, Any]] = a.client.get_json(topic_path(dlq_topic) + "/letterbox/deadLetters", query) or []
    lines = "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in letters)
    if path is None:
        click.echo(lines, nl=False)
        return
    path.write_text(lines)
    click.echo(f"Exported {len(letters)} dead letters of {dlq_topic} to {path}", err=True)
