# Topic compaction in the CLI (pulsar-admin's names):
#   letterbox admin topics compact TOPIC             PUT .../{topic}/compaction
#   letterbox admin topics compaction-status TOPIC   GET .../{topic}/compaction [--wait]
#   letterbox admin namespaces set-compaction-threshold NS --threshold 100M
#   letterbox admin namespaces get-compaction-threshold NS
#   letterbox admin namespaces remove-compaction-threshold NS
from __future__ import annotations

import re
import time
from typing import Any

import click

from letterbox.cli.admin_topics import topics
from letterbox.cli.http import AdminApiError, AdminContext, admin_command
from letterbox.cli.params import NAMESPACE, TOPIC, namespace_path, topic_path
from letterbox.topic_name import TopicName

_SIZE = re.compile(r"^(\d+)\s*([kmgt]?)b?$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def register(namespaces: click.Group) -> None:
    namespaces.add_command(set_threshold)
    namespaces.add_command(get_threshold)
    namespaces.add_command(remove_threshold)


@admin_command(topics, "compact", "topic", TOPIC)
def topics_compact(a: AdminContext, topic: TopicName) -> None:
    """Start a compaction of TOPIC (the latest value per key, for readers with read_compacted)."""
    try:
        a.client.request("PUT", topic_path(topic) + "/compaction")
    except AdminApiError as exc:
        if exc.status == 409:
            raise click.ClickException(f"{exc.reason}; `letterbox admin topics compaction-status "
                                       f"{topic} --wait` waits for it") from exc
        raise
    a.done(f"Compaction of {topic} started; `letterbox admin topics compaction-status {topic}` follows it",
           topic=str(topic))


@admin_command(topics, "compaction-status", "topic", TOPIC)
@click.option("--wait", "-w", is_flag=True, help="Wait until the compaction has finished.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=600.0, show_default=True,
              help="Seconds --wait waits at most.")
def topics_compaction_status(a: AdminContext, topic: TopicName, wait: bool, timeout: float) -> None:
    """The status of TOPIC's last compaction: NOT_RUN, RUNNING, SUCCESS or ERROR."""
    path = topic_path(topic) + "/compaction"
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = a.client.get_json(path) or {}
    while wait and status.get("status") == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = a.client.get_json(path) or {}
    error = status.get("lastError") or ""
    a.report(f"{topic}: {status.get('status')}" + (f" ({error})" if error else ""), status)
    if status.get("status") == "ERROR":
        raise SystemExit(1)
    if wait and status.get("status") == "RUNNING":
        raise click.ClickException(f"compaction of {topic} still running after {timeout:g} s")


def _bytes(text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise click.BadParameter(f"{text!r}: use bytes or 10K, 10M, 16G, 3T (0 turns it off)",
                                 param_hint="'-t' / '--threshold'")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


@admin_command(None, "set-compaction-threshold", "namespace", NAMESPACE)
@click.option("--threshold", "-t", required=True,
              help="Backlog after the last compaction that starts one: bytes, or 10K, 10M, 16G; 0 is off.")
def set_threshold(a: AdminContext, namespace: str, threshold: str) -> None:
    """Compact NAMESPACE's topics automatically past a backlog size."""
    value = _bytes(threshold)
    a.client.request("PUT", namespace_path(namespace) + "/compactionThreshold", value)  # as pulsar-admin
    a.done(f"Compaction threshold of {namespace} set to {value} bytes", namespace=namespace,
           compactionThreshold=value)


@admin_command(None, "get-compaction-threshold", "namespace", NAMESPACE)
def get_threshold(a: AdminContext, namespace: str) -> None:
    """The compaction threshold of NAMESPACE in bytes (none: not set)."""
    value = a.client.get_json(namespace_path(namespace) + "/compactionThreshold")
    a.report(f"{namespace}: {value if value is not None else 'not set'}",
             {"namespace": namespace, "compactionThreshold": value})


@admin_command(None, "remove-compaction-threshold", "namespace", NAMESPACE)
def remove_threshold(a: AdminContext, namespace: str) -> None:
    """Remove the compaction threshold of NAMESPACE (no automatic compaction)."""
    a.client.request("DELETE", namespace_path(namespace) + "/compactionThreshold")
    a.done(f"Compaction threshold of {namespace} removed", namespace=namespace)
