# `letterbox dlq ...`: look at and act on dead letter topics through the admin
# API's letterbox extensions (docs/admin.md):
#   GET  /admin/v2/namespaces/{t}/{ns}/letterbox/deadLetterTopics
#   GET  {dlq topic path}/letterbox/deadLetters?limit=N&reason=R&group=G
#   GET  {dlq topic path}/letterbox/deadLetters/groups (`dlq groups`, `dlq export`: dlq_groups.py)
#   POST {dlq topic path}/letterbox/redrive  {filters, maxMessages, ratePerSecond, dryRun}
#   DELETE {dlq topic path}/letterbox/redrive (cancel the redrive running there)
#   GET/DELETE {dlq topic path}/letterbox/redrive/{taskId}, GET .../letterbox/redriveTasks
#   (redrive tasks: `redrive --background`, `redrive-status`, `redrive-cancel --task`)
#   POST {dlq topic path}/letterbox/purge    {filters, dryRun}
# Redrive: the CLI first asks (dry run) how many match, then moves them in ONE
# call (a redrive task inside the request; the broker commits it chunk by chunk):
# every redrive call scans the whole DLQ to count and check, so a series of
# small calls would cost O(N^2) on a large DLQ. While the call runs, a terminal
# shows a progress bar (on stderr) fed by the task's record (GET
# .../letterbox/redriveTasks). Interrupting it (Ctrl-C) cancels the redrive on the
# broker and leaves the DLQ consistent; running it again carries on (nothing is
# moved twice). `redrive-cancel` stops a redrive started elsewhere. Purge asks for confirmation
# unless --yes. A --reason that is not one of DEAD_LETTER_REASONS is a usage error; what else is
# refused before anything changes is in dlq_guards.py.
from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click

from letterbox.auth_flags import current_auth
from letterbox.cli.dlq_guards import confirm_purge, require_dead_letter_topic
from letterbox.cli.http import (
    HTTP_TIMEOUT,
    AdminClient,
    AdminContext,
    admin_command,
    admin_group_options,
)
from letterbox.cli.output import echo_json, format_epoch_ms, properties_text, table
from letterbox.cli.params import (
    FAILURE_GROUP,
    KEY_VALUE,
    NAMESPACE,
    TIME_HELP,
    TOPIC,
    namespace_path,
    parse_time_ms,
    topic_path,
)
from letterbox.message_properties import DEAD_LETTER_REASONS
from letterbox.topic_name import TopicName

CHUNK = 200  # a redrive of more messages than this shows a progress bar
# the one redrive call waits for its answer up to HTTP_TIMEOUT plus its messages at this
# slowest expected speed (or at --rate)
SLOWEST_RATE = 50.0
PROGRESS_SECONDS = 0.5
FOLLOW_SECONDS = 1.0


@click.group()
@admin_group_options
@click.pass_context
def dlq(ctx: click.Context, admin_url: str, output: str) -> None:
    """Dead letter topics: list them, peek at, redrive and purge their messages.

    Talks to the broker's admin API; DLQ_TOPIC may be short
    (`orders-billing-DLQ` means persistent://public/default/orders-billing-DLQ).
    """
    ctx.obj = AdminContext(AdminClient(admin_url, auth=current_auth()), output.lower())


_FILTER_OPTIONS = [
    click.option("--reason", "-r", type=click.Choice(DEAD_LETTER_REASONS),
                 help="Only messages dead-lettered for this reason."),
    click.option("--property", "-p", "properties", type=KEY_VALUE, multiple=True,
                 help="Only messages with this property (key=value); repeat to require several."),
    click.option("--since", help=f"Only messages dead-lettered at or after this time: {TIME_HELP}."),
    click.option("--until", help=f"Only messages dead-lettered before this time: {TIME_HELP}."),
    click.option("--key", "-k", help="Only messages with this key."),
    click.option("--group", "-g", type=FAILURE_GROUP,
                 help="Only messages of this failure group (a fingerprint, as `dlq groups` lists them)."),
    click.option("--dry-run", is_flag=True, help="Only count what would be affected."),
]


def _filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_FILTER_OPTIONS):
        f = opt(f)
    return f


def _filters(reason: str | None, properties: tuple[tuple[str, str], ...], since: str | None,
             until: str | None, key: str | None = None, group: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if reason:
        body["reason"] = reason
    if group:
        body["group"] = group
    if key is not None:
        body["key"] = key
    if properties:
        body["properties"] = dict(properties)
    if since:
        body["deadLetteredAfter"] = parse_time_ms(since, "'--since'")
    if until:
        body["deadLetteredBefore"] = parse_time_ms(until, "'--until'")
    if "deadLetteredAfter" in body and "deadLetteredBefore" in body \
            and body["deadLetteredAfter"] >= body["deadLetteredBefore"]:
        raise click.BadParameter("--since must be earlier than --until")
    return body


def _describe(body: dict[str, Any]) -> str:
    parts = []
    if "reason" in body:
        parts.append(f"reason {body['reason']}")
    if "key" in body:
        parts.append(f"key {body['key']}")
    if "group" in body:
        parts.append(f"group {body['group']}")
    for k, v in (body.get("properties") or {}).items():
        parts.append(f"{k}={v}")
    if "deadLetteredAfter" in body:
        parts.append(f"since {format_epoch_ms(body['deadLetteredAfter'])}")
    if "deadLetteredBefore" in body:
        parts.append(f"until {format_epoch_ms(body['deadLetteredBefore'])}")
    return f" matching {', '.join(parts)}" if parts else ""


@admin_command(dlq, "list", "namespace", NAMESPACE)
def dlq_list(a: AdminContext, namespace: str) -> None:
    """List the dead letter topics of NAMESPACE with message counts by reason and source."""
    topics: list[dict[str, Any]] = a.client.get_json(namespace_path(namespace) + "/letterbox/deadLetterTopics") or []
    if a.json:
        echo_json(topics)
        return
    if not topics:
        click.echo(f"no dead letter topics in {namespace}")
        return
    table(["topic", "messages", "by reason", "source topics"],
          [[t.get("topic"), t.get("messages"), properties_text(t.get("byReason") or {}),
            properties_text(t.get("sourceTopics") or {})] for t in topics])


@admin_command(dlq, "peek", "dlq_topic", TOPIC)
@click.option("--count", "-n", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many dead letters to show (oldest first).")
@click.option("--reason", "-r", type=click.Choice(DEAD_LETTER_REASONS), help="Only dead letters with this reason.")
@click.option("--group", "-g", type=FAILURE_GROUP, help="Only dead letters of this failure group (`dlq groups`).")
def dlq_peek(a: AdminContext, dlq_topic: TopicName, count: int, reason: str | None, group: str | None) -> None:
    """Show dead letters: id, key, why and when they failed, properties and payload."""
    query = {"limit": str(count)}
    if reason:
        query["reason"] = reason
    if group:
        query["group"] = group
    letters: list[dict[str, Any]] = a.client.get_json(
        topic_path(dlq_topic) + "/letterbox/deadLetters", query) or []
    if a.json:
        echo_json(letters)
        return
    if not letters:
        click.echo(f"no dead letters in {dlq_topic}" + (f" with reason {reason}" if reason else ""))
        return
    for m in letters:
        props: dict[str, str] = m.get("properties") or {}
        click.echo(f"Message ID: {m.get('messageId')}")
        click.echo(f"Key: {m.get('key') or '-'}")
        click.echo(f"Publish time: {format_epoch_ms(m.get('publishTime'))}")
        if m.get("eventTime"):
            click.echo(f"Event time: {format_epoch_ms(m.get('eventTime'))}")
        for k in sorted(props):
            click.echo(f"  {k}: {props[k]}")
        text = m.get("payloadText")
        click.echo(text if text is not None else f"(binary, base64) {m.get('payloadBase64', '')}")
        click.echo("")


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _running_task_moved(client: AdminClient, redrive_path: str) -> int:
    """How many messages the redrive running inside a request on this DLQ has moved
    (its task's record); 0 when it cannot be read (the bar then waits for the end)."""
    try:
        tasks = client.get_json(redrive_path + "Tasks") or []
    except click.ClickException:
        return 0
    running = [t for t in tasks if t.get("state") == "running" and not t.get("background")]
    return int(running[-1].get("moved") or 0) if running else 0


@admin_command(dlq, "redrive", "dlq_topic", TOPIC)
@click.option("--to", "target", type=TOPIC,
              help="Move to this topic instead of each message's REAL_TOPIC.")
@_filter_options
@click.option("--max-messages", type=click.IntRange(min=1), help="Move at most this many messages.")
@click.option("--rate", type=click.FloatRange(min=1, max=100_000),
              help="At most this many messages a second (1 to 100,000).")
@click.option("--subscription-only", is_flag=True,
              help="Redeliver each message only to the subscription it was dead-lettered from; "
                   "the topic's other subscriptions do not see it again.")
@click.option("--background", is_flag=True,
              help="Start a redrive task on the broker and return its id at once; it survives "
                   "broker restarts (follow it with `dlq redrive-status`).")
def dlq_redrive(a: AdminContext, dlq_topic: TopicName, target: TopicName | None, reason: str | None,
                properties: tuple[tuple[str, str], ...], since: str | None, until: str | None, key: str | None,
                group: str | None, max_messages: int | None, dry_run: bool, rate: float | None, subscription_only: bool,
                background: bool) -> None:
    """Move dead letters back to their source topic (REAL_TOPIC) or to --to TOPIC.

    Redriven messages keep key and properties and start with a delivery count
    of 0. Safe to interrupt and run again: nothing is moved twice.
    """
    if subscription_only and target is not None:
        raise click.BadParameter("--subscription-only goes back to each message's own topic and "
                                 "subscription: leave out --to", param_hint="'--to'")
    body = _filters(reason, properties, since, until, key, group)
    require_dead_letter_topic(a, dlq_topic)
    if target is not None:
        body["target"] = str(target)
    if subscription_only:
        body["subscriptionOnly"] = True
    path = topic_path(dlq_topic) + "/letterbox/redrive"
    where = (f"to {target}" if target else "into the subscriptions they were dead-lettered from"
             if subscription_only else "to their source topics")
    if background and not dry_run:
        _start_task(a, dlq_topic, path, body, max_messages, rate, where)
        return
    probe = a.client.post_json(path, {**body, "dryRun": True}) or {}
    matched = int(probe.get("matched") or 0)
    if dry_run or matched == 0:
        result = {"matched": matched, "moved": 0, "remaining": int(probe.get("remaining", matched) or 0),
                  "dryRun": dry_run}
        if dry_run:
            message = (f"Dry run: would move {min(matched, max_messages or matched)} of {matched} "
                       f"messages{_describe(body)} from {dlq_topic} {where}")
        else:
            message = f"Nothing to redrive: no messages{_describe(body)} in {dlq_topic}"
        a.report(message, result)
        return
    goal = min(matched, max_messages) if max_messages else matched
    if rate is not None:
        body["ratePerSecond"] = rate
    timeout = HTTP_TIMEOUT + goal / (rate or SLOWEST_RATE)
    outcome: dict[str, Any] = {}

    def move() -> None:  # one call: the broker counts and checks the DLQ once
        try:
            outcome["result"] = a.client.post_json(path, {**body, "maxMessages": goal, "dryRun": False},
                                                   timeout=timeout) or {}
        except BaseException as exc:  # raised again in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=move, name="letterbox-redrive", daemon=True)
    show_bar = not a.json and goal > CHUNK
    shown = 0
    try:
        progress: Any = (click.progressbar(length=goal, label="Redriving", file=sys.stderr, show_pos=True)
                         if show_bar else contextlib.nullcontext(_NoBar()))
        with progress as bar:
            worker.start()
            while worker.is_alive():
                worker.join(PROGRESS_SECONDS)
                if show_bar and worker.is_alive():
                    now = _running_task_moved(a.client, path)
                    if now > shown:
                        bar.update(now - shown)
                        shown = now
            if "error" in outcome:
                raise outcome["error"]
            res = outcome["result"]
            moved, remaining = int(res.get("moved") or 0), int(res.get("remaining") or 0)
            bar.update(max(moved - shown, 0))
    except KeyboardInterrupt:
        with contextlib.suppress(click.ClickException):
            a.client.request("DELETE", path)  # stop the redrive in flight on the broker
        raise click.ClickException(
            f"interrupted after about {shown} of {goal} messages were moved (the redrive was cancelled); "
            "run the same command again to move the rest: nothing is moved twice"
        ) from None
    a.report(f"Moved {moved} messages{_describe(body)} from {dlq_topic} {where}; "
             f"{remaining} matching messages remain",
             {"matched": matched, "moved": moved, "remaining": remaining, "dryRun": False})


def _start_task(a: AdminContext, dlq_topic: TopicName, path: str, body: dict[str, Any],
                max_messages: int | None, rate: float | None, where: str) -> None:
    if max_messages is not None:
        body["maxMessages"] = max_messages
    if rate is not None:
        body["ratePerSecond"] = rate
    task = a.client.post_json(path, {**body, "background": True}) or {}
    a.report(f"Started redrive task {task.get('taskId')}: about {task.get('remaining')} messages"
             f"{_describe(body)} from {dlq_topic} {where}; follow it with "
             f"`letterbox dlq redrive-status {dlq_topic} {task.get('taskId')} --follow`", task)


def _task_line(t: dict[str, Any]) -> str:
    left = f"{'~' if t.get('remainingEstimated') else ''}{t.get('remaining')}"
    line = (f"task {t.get('taskId')}: {t.get('state')}, moved {t.get('moved')}, skipped {t.get('skipped')}, "
            f"remaining {left}")
    if t.get("subscriptionOnly"):
        line += ", subscription-only"
    if t.get("restarts"):
        line += f", resumed {t['restarts']}x after broker restarts"
    if t.get("error"):
        line += f", error: {t['error']}"
    return line


@admin_command(dlq, "redrive-status", "dlq_topic", TOPIC)
@click.argument("task_id", required=False)
@click.option("--follow", "-f", is_flag=True, help="Poll the task and show its progress until it ends.")
def dlq_redrive_status(a: AdminContext, dlq_topic: TopicName, task_id: str | None, follow: bool) -> None:
    """Show the redrive tasks of DLQ_TOPIC, or the progress of TASK_ID."""
    if task_id is None:
        tasks: list[dict[str, Any]] = a.client.get_json(topic_path(dlq_topic) + "/letterbox/redriveTasks") or []
        if a.json:
            echo_json(tasks)
        elif not tasks:
            click.echo(f"no redrive tasks on {dlq_topic}")
        else:
            for t in tasks:
                click.echo(_task_line(t))
        return
    path = topic_path(dlq_topic) + f"/letterbox/redrive/{task_id}"
    task: dict[str, Any] = a.client.get_json(path) or {}
    while follow and task.get("state") == "running":
        if not a.json:
            click.echo(_task_line(task), err=True)
        time.sleep(FOLLOW_SECONDS)
        task = a.client.get_json(path) or {}
    a.report(_task_line(task), task)


@admin_command(dlq, "redrive-cancel", "dlq_topic", TOPIC)
@click.option("--task", "task_id", help="Cancel this redrive task (else whatever redrive runs on DLQ_TOPIC).")
def dlq_redrive_cancel(a: AdminContext, dlq_topic: TopicName, task_id: str | None) -> None:
    """Stop the redrive running on DLQ_TOPIC (started by this or another client).

    What it has moved stays moved; run the redrive again to move the rest.
    """
    if task_id is not None:
        task = a.client.request("DELETE", topic_path(dlq_topic) + f"/letterbox/redrive/{task_id}").json()
        a.report(f"Cancelled redrive task {task_id} on {dlq_topic} after {task.get('moved')} messages", task)
        return
    a.client.request("DELETE", topic_path(dlq_topic) + "/letterbox/redrive")
    a.report(f"Cancelled the redrive running on {dlq_topic}", {"cancelled": True})


@admin_command(dlq, "purge", "dlq_topic", TOPIC)
@_filter_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def dlq_purge(a: AdminContext, dlq_topic: TopicName, reason: str | None, properties: tuple[tuple[str, str], ...],
              since: str | None, until: str | None, key: str | None, group: str | None, dry_run: bool,
              yes: bool) -> None:
    """Delete dead letters for good (all, or those matching the filters)."""
    body = _filters(reason, properties, since, until, key, group)
    require_dead_letter_topic(a, dlq_topic)
    path = topic_path(dlq_topic) + "/letterbox/purge"
    if dry_run or not yes:
        probe = a.client.post_json(path, {**body, "dryRun": True}) or {}
        count = int(probe.get("purged") or 0)
        if dry_run:
            a.report(f"Dry run: would purge {count} messages{_describe(body)} from {dlq_topic}",
                     {"purged": count, "dryRun": True})
            return
        if count == 0:
            a.report(f"Nothing to purge: no messages{_describe(body)} in {dlq_topic}",
                     {"purged": 0, "dryRun": False})
            return
        confirm_purge(f"Permanently delete {count} messages{_describe(body)} from {dlq_topic}?")
    res = a.client.post_json(path, {**body, "dryRun": False}) or {}
    purged = int(res.get("purged") or 0)
    a.report(f"Purged {purged} messages{_describe(body)} from {dlq_topic}", {"purged": purged, "dryRun": False})
