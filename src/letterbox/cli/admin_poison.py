# `letterbox admin topics poison-suspects TOPIC -s SUB`: the poison-message early
# warning of one subscription (GET .../subscription/{sub}/letterbox/poison-suspects):
# messages redelivered more than half the times its dead-letter policy allows,
# with their delivery count, the maximum and the last failure reason.
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from letterbox.cli.admin_topics import SUB_OPTION, topics
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, table
from letterbox.cli.params import TOPIC, q, topic_path
from letterbox.topic_name import TopicName


def _when(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@admin_command(topics, "poison-suspects", "topic", TOPIC)
@SUB_OPTION
@click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Most suspects to list (the most redelivered first).")
def topics_poison_suspects(a: AdminContext, topic: TopicName, subscription: str, limit: int) -> None:
    """Messages of a subscription above half their max redeliveries (poison suspects)."""
    path = f"{topic_path(topic)}/subscription/{q(subscription)}/letterbox/poison-suspects"
    found: dict[str, Any] = a.client.get_json(path, {"limit": str(limit)}) or {}
    if a.json:
        echo_json(found)
        return
    top = found.get("maxRedeliveries")
    if top is None:
        click.echo(f"{topic} / {subscription}: no dead-letter policy, so no redelivery limit and no suspects")
        return
    count = found.get("suspectCount", 0)
    click.echo(f"{topic} / {subscription}: {count} poison suspect(s), over half of max {top} redeliveries")
    rows = [[s["messageId"], s["deliveryCount"], s["maxRedeliveries"], _when(s.get("lastDeliveryTime")),
             _when(s.get("nextDeliveryTime")), s.get("lastFailureReason")] for s in found.get("suspects", [])]
    if rows:
        table(["message id", "deliveries", "max", "last delivery (UTC)", "next delivery (UTC)",
               "last failure reason"], rows)
    if found.get("truncated"):
        click.echo(f"(showing {len(rows)}; --limit shows more)")
