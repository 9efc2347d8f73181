# `letterbox admin topics attempts TOPIC SUBSCRIPTION MESSAGE_ID`: the delivery attempt
# log of one message in one subscription (GET .../subscription/{sub}/letterbox/attempts/{id}):
# each failed delivery with when, to which consumer, how it ended and why. A message that
# was dead-lettered from the subscription answers from its dead letter's DELIVERY_ATTEMPTS.
# MESSAGE_ID is checked here before any call (ledger:entry:partition:batchIndex).
from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import click

from letterbox.cli.admin_topics import topics
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, table
from letterbox.cli.params import TOPIC, q, topic_path
from letterbox.topic_name import TopicName

_ID_RE = re.compile(r"[0-9]{1,18}:[0-9]{1,18}(:-?[0-9]{1,9}(:-?[0-9]{1,9})?)?")


def _message_id(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    text = value.strip()
    if not _ID_RE.fullmatch(text):
        raise click.BadParameter(
            f"{value!r}: use LEDGER:ENTRY:PARTITION:BATCH_INDEX, e.g. 12:7:-1:-1 "
            "(the ORIGIN_MESSAGE_ID of a dead letter; -1 for no partition or batch)")
    return text


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@admin_command(topics, "attempts", "topic", TOPIC)
@click.argument("subscription")
@click.argument("message_id", metavar="MESSAGE_ID", callback=_message_id)
def topics_attempts(a: AdminContext, topic: TopicName, subscription: str, message_id: str) -> None:
    """The delivery attempt log of MESSAGE_ID in SUBSCRIPTION of TOPIC.

    MESSAGE_ID is LEDGER:ENTRY:PARTITION:BATCH_INDEX (as ORIGIN_MESSAGE_ID
    writes it).
    """
    path = f"{topic_path(topic)}/subscription/{q(subscription)}/letterbox/attempts/{q(message_id)}"
    found: dict[str, Any] = a.client.get_json(path) or {}
    if a.json:
        echo_json(found)
        return
    attempts = found.get("attempts") or []
    state = "acknowledged" if found.get("acknowledged") else f"unacknowledged, {found.get('redeliveryCount', 0)} " \
        "redelivery(ies)"
    click.echo(f"{found.get('topic', topic)} / {subscription} message {found.get('messageId', message_id)}: "
               f"{state}, {len(attempts)} failed attempt(s)")
    dead = found.get("deadLetter")
    if dead:
        click.echo(f"dead-lettered as {dead.get('messageId')} on {dead.get('topic')}")
    if attempts:
        table(["#", "delivered (UTC)", "ended (UTC)", "consumer", "address", "ending", "reason"],
              [[i, _when(t.get("deliveredAt")), _when(t.get("endedAt")), t.get("consumer") or "-",
                t.get("address") or "-", t.get("ending"), t.get("reason") or "-"]
               for i, t in enumerate(attempts, 1)])
