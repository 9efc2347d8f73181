# What `letterbox dlq redrive` and `purge` refuse before anything changes (exit
# status 2, one line naming the fix, cli/params.py's Refused): a topic that is
# not a dead letter topic (a purge of a source topic would delete work, a
# redrive would move it nowhere), and a purge that needs a confirmation where
# there is no terminal to give it (stdin closed or piped: use --yes).
from __future__ import annotations

import sys

import click

from letterbox.cli.http import AdminContext
from letterbox.cli.params import Refused, namespace_path
from letterbox.topic_name import TopicName


def require_dead_letter_topic(a: AdminContext, topic: TopicName) -> None:
    """Refuse a redrive or purge of a topic that is not a dead letter topic: its name (of the
    partitioned topic, for a partition) ends in -DLQ, or the namespace's listing of dead
    letter topics names it."""
    if topic.partitioned_parent.local.endswith("-DLQ"):
        return
    listed = a.client.get_json(namespace_path(topic.namespace_name) + "/letterbox/deadLetterTopics") or []
    if any(t.get("topic") in (str(topic), str(topic.partitioned_parent)) for t in listed):
        return
    raise Refused(f"{topic} is not a dead letter topic (its name does not end in -DLQ and it holds no "
                  f"dead letters): name its DLQ, e.g. {topic.local}-<subscription>-DLQ "
                  f"(`letterbox dlq list {topic.namespace_name}` lists them)")


def confirm_purge(question: str) -> None:
    """Ask on the terminal; without one (stdin closed or piped) refuse and name --yes."""
    try:
        confirmed = click.confirm(question, err=True)
    except click.Abort:
        if sys.stdin.isatty():
            raise
        click.echo(err=True)  # end the prompt's line
        raise Refused("no terminal to confirm the purge on: add --yes to purge without asking") from None
    if not confirmed:
        raise click.Abort()
