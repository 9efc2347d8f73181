# `letterbox admin topics unload|terminate|terminate-partitioned-topic|last-message-id|
# trim-topic|partitioned-stats-internal|update-partitioned-topic`: pulsar-admin's topic
# operations beyond create/delete/stats, one REST call each (routes_topic_ops.py and
# routes_topics.py on the broker). TOPIC may be short, as in every `topics` verb.
from __future__ import annotations

from typing import Any

import click

from letterbox.cli.admin_topics import topics
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, key_values, table
from letterbox.cli.params import TOPIC, topic_path
from letterbox.topic_name import TopicName


def _message_id(mid: dict[str, Any]) -> str:
    return f"{mid.get('ledgerId')}:{mid.get('entryId')}:{mid.get('partitionIndex', -1)}"


@admin_command(topics, "unload", "topic", TOPIC)
def topics_unload(a: AdminContext, topic: TopicName) -> None:
    """Unload a topic: close its producers and consumers (they reconnect; nothing is lost)."""
    a.client.request("PUT", topic_path(topic) + "/unload")
    a.done(f"Unloaded topic {topic}", topic=str(topic))


@admin_command(topics, "terminate", "topic", TOPIC)
def topics_terminate(a: AdminContext, topic: TopicName) -> None:
    """Terminate a topic: no more messages; prints the id of its last message."""
    mid = a.client.post_json(topic_path(topic) + "/terminate", None)
    a.report(f"Topic {topic} successfully terminated at {_message_id(mid)}", mid)


@admin_command(topics, "terminate-partitioned-topic", "topic", TOPIC)
def topics_terminate_partitioned(a: AdminContext, topic: TopicName) -> None:
    """Terminate every partition of a partitioned topic."""
    out: dict[str, Any] = a.client.post_json(topic_path(topic) + "/terminate/partitions", None) or {}
    if a.json:
        echo_json(out)
        return
    table(["partition", "lastMessageId"], [[p, _message_id(m)] for p, m in sorted(out.items(), key=lambda i: int(i[0]))])


@admin_command(topics, "last-message-id", "topic", TOPIC)
def topics_last_message_id(a: AdminContext, topic: TopicName) -> None:
    """The id of the last message stored in a topic (LEDGER:ENTRY:PARTITION)."""
    mid = a.client.get_json(topic_path(topic) + "/lastMessageId")
    a.report(_message_id(mid), mid)


@admin_command(topics, "trim-topic", "topic", TOPIC)
def topics_trim(a: AdminContext, topic: TopicName) -> None:
    """Delete now the acknowledged messages retention no longer keeps."""
    a.client.request("POST", topic_path(topic) + "/trim")
    a.done(f"Trimmed topic {topic}", topic=str(topic))


@admin_command(topics, "partitioned-stats-internal", "topic", TOPIC)
def topics_partitioned_internal(a: AdminContext, topic: TopicName) -> None:
    """Storage-level stats of every partition of a partitioned topic."""
    stats = a.client.get_json(topic_path(topic) + "/partitioned-internalStats") or {}
    if a.json:
        echo_json(stats)
        return
    click.echo(f"topic: {topic} ({stats.get('metadata', {}).get('partitions')} partitions)")
    for name, part in sorted((stats.get("partitions") or {}).items()):
        click.echo(f"{name}:")
        key_values({k: v for k, v in part.items() if k in ("numberOfEntries", "totalSize", "lastConfirmedEntry",
                                                           "entriesAddedCounter")}, indent="  ")
        click.echo("  cursors: " + (", ".join(sorted(part.get("cursors") or {})) or "none"))


@admin_command(topics, "update-partitioned-topic", "topic", TOPIC)
@click.option("--partitions", "-p", type=click.IntRange(min=1), required=True,
              help="The new number of partitions (only increases are allowed).")
def topics_update_partitioned(a: AdminContext, topic: TopicName, partitions: int) -> None:
    """Raise the partition count of a partitioned topic; new partitions get its subscriptions."""
    a.client.request("POST", topic_path(topic) + "/partitions", partitions)
    a.done(f"Updated partitioned topic {topic} to {partitions} partitions", topic=str(topic), partitions=partitions)
