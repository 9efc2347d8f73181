# `letterbox admin topics ...`: topics, their stats, and the subscription and message verbs
# of pulsar-admin's `topics` command, mapped onto Pulsar's admin v2 paths (.../{topic},
# .../partitions, .../stats, .../subscription/{sub}/skip/{n}, .../resetcursor/{ms}, ...).
# TOPIC may be short: `orders` is persistent://public/default/orders. Messages read through
# the API come back as a raw body plus X-Pulsar-* headers; PeekedMessage makes them one record.
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from letterbox.cli.http import AdminApiError, AdminContext, Response, admin_command
from letterbox.cli.output import echo_json, key_values, payload_json, payload_text, table
from letterbox.cli.params import (
    NAMESPACE,
    TIME_HELP,
    TOPIC,
    namespace_path,
    parse_duration_seconds,
    parse_message_id,
    parse_time_ms,
    q,
    topic_path,
)
from letterbox.errors import InvalidTopicName
from letterbox.topic_name import TopicName

_STAT_FIELDS = (
    "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "msgInCounter",
    "msgOutCounter", "bytesInCounter", "bytesOutCounter", "averageMsgSize", "storageSize",
    "backlogSize",
)
EXPIRE_TIMEOUT = 3600.0  # seconds an expire-messages call may take (it answers when all is done)
SUB_OPTION = click.option("--subscription", "-s", required=True, help="Subscription name.")
FORCE_OPTION = click.option("--force", "-f", is_flag=True, help="Close connected producers and consumers first.")


def _force_query(force: bool) -> dict[str, str] | None:
    return {"force": "true"} if force else None


@click.group()
def topics() -> None:
    """Topics, their stats, subscriptions and messages.

    TOPIC may be short: `orders` means persistent://public/default/orders and
    `acme/ops/orders` means persistent://acme/ops/orders.
    """


@admin_command(topics, "list", "namespace", NAMESPACE)
def topics_list(a: AdminContext, namespace: str) -> None:
    """List the topics of NAMESPACE (persistent and non-persistent, partitions included)."""
    a.names(a.client.get_json(namespace_path(namespace) + "/topics", {"mode": "ALL"}))


@admin_command(topics, "create", "topic", TOPIC)
def topics_create(a: AdminContext, topic: TopicName) -> None:
    """Create a non-partitioned topic."""
    a.client.request("PUT", topic_path(topic))
    a.done(f"Created topic {topic}", topic=str(topic))


@admin_command(topics, "create-partitioned-topic", "topic", TOPIC)
@click.option("--partitions", "-p", type=click.IntRange(min=1), required=True, help="Number of partitions.")
def topics_create_partitioned(a: AdminContext, topic: TopicName, partitions: int) -> None:
    """Create a partitioned topic with N partitions."""
    a.client.request("PUT", topic_path(topic) + "/partitions", partitions)
    a.done(f"Created partitioned topic {topic} with {partitions} partitions",
           topic=str(topic), partitions=partitions)


@admin_command(topics, "delete", "topic", TOPIC)
@FORCE_OPTION
def topics_delete(a: AdminContext, topic: TopicName, force: bool) -> None:
    """Delete a non-partitioned topic, its messages and subscriptions."""
    a.client.request("DELETE", topic_path(topic), query=_force_query(force))
    a.done(f"Deleted topic {topic}", topic=str(topic))


@admin_command(topics, "delete-partitioned-topic", "topic", TOPIC)
@FORCE_OPTION
def topics_delete_partitioned(a: AdminContext, topic: TopicName, force: bool) -> None:
    """Delete a partitioned topic and all its partitions."""
    a.client.request("DELETE", topic_path(topic) + "/partitions", query=_force_query(force))
    a.done(f"Deleted partitioned topic {topic}", topic=str(topic))


# --- stats ---------------------------------------------------------------------------
def _backlog(subs: dict[str, Any]) -> int:
    return sum(int(s.get("msgBacklog") or 0) for s in subs.values())


def _print_stats(topic: TopicName, stats: dict[str, Any]) -> None:
    click.echo(f"topic: {topic}")
    key_values({k: stats[k] for k in _STAT_FIELDS if k in stats})
    pubs: list[dict[str, Any]] = stats.get("publishers") or []
    click.echo("publishers:" + ("" if pubs else " none"))
    if pubs:
        table(["name", "id", "accessMode", "rateIn", "address"],
              [[p.get("producerName"), p.get("producerId"), p.get("accessMode"), p.get("msgRateIn"),
                p.get("address")] for p in pubs], indent="  ")
    subs: dict[str, Any] = stats.get("subscriptions") or {}
    click.echo("subscriptions:" + ("" if subs else " none"))
    if subs:
        table(
            ["name", "type", "backlog", "unacked", "delayed", "rateOut", "rateRedeliver", "consumers"],
            [[n, s.get("type"), s.get("msgBacklog"), s.get("unackedMessages"), s.get("msgDelayed"),
              s.get("msgRateOut"), s.get("msgRateRedeliver"), len(s.get("consumers") or [])]
             for n, s in sorted(subs.items())],
            indent="  ",
        )


@admin_command(topics, "stats", "topic", TOPIC)
def topics_stats(a: AdminContext, topic: TopicName) -> None:
    """Rates, counters, storage, publishers and subscriptions of a topic."""
    stats = a.client.get_json(topic_path(topic) + "/stats")
    if a.json:
        echo_json(stats)
    else:
        _print_stats(topic, stats or {})


@admin_command(topics, "partitioned-stats", "topic", TOPIC)
@click.option("--per-partition/--no-per-partition", default=True, show_default=True,
              help="Include each partition's stats.")
def topics_partitioned_stats(a: AdminContext, topic: TopicName, per_partition: bool) -> None:
    """Stats of a partitioned topic, summed over its partitions."""
    stats = a.client.get_json(topic_path(topic) + "/partitioned-stats",
                              {"perPartition": "true" if per_partition else "false"}) or {}
    if a.json:
        echo_json(stats)
        return
    click.echo(f"partitions: {(stats.get('metadata') or {}).get('partitions', '-')}")
    _print_stats(topic, stats)
    parts: dict[str, Any] = stats.get("partitions") or {}
    if parts:
        click.echo("per partition:")
        table(["partition", "msgIn", "msgOut", "storageSize", "backlog", "publishers", "subscriptions"],
              [[name, s.get("msgInCounter"), s.get("msgOutCounter"), s.get("storageSize"),
                _backlog(s.get("subscriptions") or {}), len(s.get("publishers") or []),
                len(s.get("subscriptions") or {})]
               for name, s in sorted(parts.items(), key=lambda kv: _partition_index(kv[0]))],
              indent="  ")


def _partition_index(name: str) -> int:
    try:
        return TopicName.parse(name).partition_index
    except InvalidTopicName:
        return -1


@admin_command(topics, "internal-stats", "topic", TOPIC)
def topics_internal_stats(a: AdminContext, topic: TopicName) -> None:
    """Storage-level stats: entries, ledgers and cursor positions."""
    stats = a.client.get_json(topic_path(topic) + "/internalStats") or {}
    if a.json:
        echo_json(stats)
        return
    click.echo(f"topic: {topic}")
    key_values(stats)
    cursors: dict[str, Any] = stats.get("cursors") or {}
    click.echo("cursors:" + ("" if cursors else " none"))
    if cursors:
        table(["name", "markDelete", "read", "active", "deletedRanges"],
              [[n, c.get("markDeletePosition"), c.get("readPosition"), c.get("active"),
                c.get("individuallyDeletedMessages")] for n, c in sorted(cursors.items())],
              indent="  ")


# --- subscriptions ---------------------------------------------------------------------
def _sub_path(topic: TopicName, sub: str) -> str:
    return f"{topic_path(topic)}/subscription/{q(sub)}"


@admin_command(topics, "subscriptions", "topic", TOPIC)
def topics_subscriptions(a: AdminContext, topic: TopicName) -> None:
    """List the subscriptions of a topic."""
    a.names(a.client.get_json(topic_path(topic) + "/subscriptions"))


@admin_command(topics, "create-subscription", "topic", TOPIC)
@SUB_OPTION
@click.option("--messageId", "-m", "message_id", default="latest", show_default=True,
              help="Where the subscription starts: earliest, latest or LEDGER:ENTRY.")
def topics_create_subscription(a: AdminContext, topic: TopicName, subscription: str, message_id: str) -> None:
    """Create a durable subscription at a position."""
    ledger, entry, partition = parse_message_id(message_id, "'-m' / '--messageId'")
    body = {"ledgerId": ledger, "entryId": entry, "partitionIndex": partition}
    a.client.request("PUT", _sub_path(topic, subscription), body)
    a.done(f"Created subscription {subscription} on {topic} at {message_id}",
           topic=str(topic), subscription=subscription, messageId=message_id)


@admin_command(topics, "unsubscribe", "topic", TOPIC)
@SUB_OPTION
@click.option("--force", "-f", is_flag=True, help="Disconnect its consumers first.")
def topics_unsubscribe(a: AdminContext, topic: TopicName, subscription: str, force: bool) -> None:
    """Delete a subscription and its cursor."""
    a.client.request("DELETE", _sub_path(topic, subscription), query=_force_query(force))
    a.done(f"Deleted subscription {subscription} on {topic}", topic=str(topic), subscription=subscription)


@admin_command(topics, "skip", "topic", TOPIC)
@SUB_OPTION
@click.option("--count", "-n", type=click.IntRange(min=1), required=True, help="Messages to skip.")
def topics_skip(a: AdminContext, topic: TopicName, subscription: str, count: int) -> None:
    """Skip (acknowledge) the next N messages of a subscription."""
    a.client.request("POST", f"{_sub_path(topic, subscription)}/skip/{count}")
    a.done(f"Skipped {count} messages on {topic} subscription {subscription}",
           topic=str(topic), subscription=subscription, skipped=count)


@admin_command(topics, "clear-backlog", "topic", TOPIC)
@SUB_OPTION
def topics_clear_backlog(a: AdminContext, topic: TopicName, subscription: str) -> None:
    """Skip every message in a subscription's backlog."""
    a.client.request("POST", f"{_sub_path(topic, subscription)}/skip_all")
    a.done(f"Cleared the backlog of {topic} subscription {subscription}",
           topic=str(topic), subscription=subscription)


@admin_command(topics, "reset-cursor", "topic", TOPIC)
@SUB_OPTION
@click.option("--time", "-t", "when", help=f"Reset to a point in time: {TIME_HELP}.")
@click.option("--messageId", "-m", "message_id", help="Reset to a message: LEDGER:ENTRY, earliest or latest.")
def topics_reset_cursor(a: AdminContext, topic: TopicName, subscription: str, when: str | None,
                        message_id: str | None) -> None:
    """Move a subscription's cursor to a point in time or to a message."""
    if (when is None) == (message_id is None):
        raise click.UsageError("give exactly one of --time/-t or --messageId/-m")
    if message_id is not None:
        ledger, entry, partition = parse_message_id(message_id, "'-m' / '--messageId'")
        body = {"ledgerId": ledger, "entryId": entry, "partitionIndex": partition, "batchIndex": -1}
        a.client.request("POST", f"{_sub_path(topic, subscription)}/resetcursor", body)
        a.done(f"Reset {topic} subscription {subscription} to message {message_id}",
               topic=str(topic), subscription=subscription, messageId=message_id)
        return
    assert when is not None
    timestamp = parse_time_ms(when, "'-t' / '--time'")
    a.client.request("POST", f"{_sub_path(topic, subscription)}/resetcursor/{timestamp}")
    iso = datetime.fromtimestamp(timestamp / 1000).astimezone().isoformat(timespec="seconds")
    a.done(f"Reset {topic} subscription {subscription} to {iso}",
           topic=str(topic), subscription=subscription, timestamp=timestamp)


@admin_command(topics, "expire-messages", "topic", TOPIC)
@SUB_OPTION
@click.option("--expireTime", "-t", "expire", required=True,
              help="Expire messages older than this: seconds, or 10m, 1h, 3d.")
def topics_expire(a: AdminContext, topic: TopicName, subscription: str, expire: str) -> None:
    """Expire a subscription's messages older than the given time (dead-lettered where a
    dead-letter policy applies, else acknowledged); waits until all of them are done."""
    seconds = parse_duration_seconds(expire, "'-t' / '--expireTime'")
    if seconds < 0:
        raise click.BadParameter(f"{expire!r} is negative", param_hint="'-t' / '--expireTime'")
    # the broker answers once the whole backlog is done: a large one takes longer than a request
    a.client.request("POST", f"{_sub_path(topic, subscription)}/expireMessages/{seconds}", timeout=EXPIRE_TIMEOUT)
    a.done(f"Expired messages older than {seconds}s on {topic} subscription {subscription}",
           topic=str(topic), subscription=subscription, expireTimeInSeconds=seconds)


# --- messages ---------------------------------------------------------------------------
@dataclass
class PeekedMessage:
    message_id: str | None
    properties: dict[str, str]
    headers: dict[str, str]
    payload: bytes

    @classmethod
    def from_response(cls, resp: Response) -> PeekedMessage:
        props: dict[str, str] = {}
        headers: dict[str, str] = {}
        message_id = None
        for k, v in resp.headers:
            low = k.lower()
            if low.startswith("x-pulsar-property-"):
                props[k[len("X-Pulsar-PROPERTY-"):]] = v
            elif low == "x-pulsar-message-id":
                message_id = v
            elif low.startswith("x-pulsar-"):
                headers[k[len("X-Pulsar-"):]] = v
        return cls(message_id, props, headers, resp.body)

    def as_json(self) -> dict[str, Any]:
        return {"messageId": self.message_id, "properties": self.properties, "headers": self.headers,
                **payload_json(self.payload)}

    def echo(self) -> None:
        click.echo(f"Message ID: {self.message_id or '-'}")
        if self.properties:
            click.echo("Properties: " + ", ".join(f"{k}={v}" for k, v in self.properties.items()))
        for k, v in self.headers.items():
            click.echo(f"{k}: {v}")
        click.echo(payload_text(self.payload))
        click.echo("")


def _show_messages(a: AdminContext, messages: list[PeekedMessage]) -> None:
    if a.json:
        echo_json([m.as_json() for m in messages])
        return
    for m in messages:
        m.echo()


@admin_command(topics, "peek-messages", "topic", TOPIC)
@SUB_OPTION
@click.option("--count", "-n", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many messages to peek.")
def topics_peek(a: AdminContext, topic: TopicName, subscription: str, count: int) -> None:
    """Show the next messages of a subscription without consuming them."""
    messages: list[PeekedMessage] = []
    for i in range(1, count + 1):
        try:
            resp = a.client.request("GET", f"{_sub_path(topic, subscription)}/position/{i}")
        except AdminApiError as exc:
            if messages and exc.status in (404, 412):
                break  # fewer messages than asked for
            raise
        messages.append(PeekedMessage.from_response(resp))
    _show_messages(a, messages)


@admin_command(topics, "get-message-by-id", "topic", TOPIC)
@click.option("--ledgerId", "-l", "ledger", type=int, required=True, help="Ledger id of the message.")
@click.option("--entryId", "-e", "entry", type=int, required=True, help="Entry id of the message.")
def topics_get_message(a: AdminContext, topic: TopicName, ledger: int, entry: int) -> None:
    """Show one message by its ledger and entry id."""
    resp = a.client.request("GET", f"{topic_path(topic)}/ledger/{ledger}/entry/{entry}")
    _show_messages(a, [PeekedMessage.from_response(resp)])


@admin_command(topics, "examine-message", "topic", TOPIC)
@click.option("--initialPosition", "-i", "initial", type=click.Choice(["earliest", "latest"]),
              default="latest", show_default=True, help="Count from the first or the last message.")
@click.option("--messagePosition", "-m", "position", type=click.IntRange(min=1), default=1,
              show_default=True, help="1 is the first (or last) message.")
def topics_examine(a: AdminContext, topic: TopicName, initial: str, position: int) -> None:
    """Show the n-th message from the start or the end of a topic."""
    resp = a.client.request("GET", f"{topic_path(topic)}/examinemessage",
                            query={"initialPosition": initial, "messagePosition": str(position)})
    _show_messages(a, [PeekedMessage.from_response(resp)])
