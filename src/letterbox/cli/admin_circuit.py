# `letterbox admin circuit get|open|close TOPIC SUBSCRIPTION`: a subscription's circuit
# breaker (outage detection; GET/POST .../subscription/{sub}/letterbox/circuit).
# `open` stops dispatching to the subscription until an operator closes it or the
# cool-down lets a probe through; `close` resumes dispatching at once. The broker's
# refusal (404 unknown subscription, 409 no circuit policy) is shown as it says it.
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, key_values, table
from letterbox.cli.params import TOPIC, q, topic_path
from letterbox.topic_name import TopicName


@click.group()
def circuit() -> None:
    """A subscription's circuit breaker (outage detection)."""


def _when(ms: int | None) -> str | None:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds") if ms else None


def _show(a: AdminContext, state: dict[str, Any]) -> None:
    if a.json:
        echo_json(state)
        return
    parts = state.get("partitions") or {state.get("topic", ""): state}
    for name, s in parts.items():
        if not s.get("enabled"):
            click.echo(f"{name} / {state.get('subscription')}: no circuit breaker "
                       "(consumer property letterbox.circuit.enabled=true turns it on)")
            continue
        window = s.get("window") or {}
        key_values({"topic": name, "subscription": state.get("subscription"), "state": s.get("state"),
                    "trips": s.get("trips"), "opened at (UTC)": _when(s.get("openedAt")),
                    "probe at (UTC)": _when(s.get("probeAt")),
                    "window": f"{window.get('failures', 0)} of {window.get('deliveries', 0)} failed, "
                              f"{window.get('distinctMessages', 0)} messages"})
        rows = [[_when(h["at"]), h["from"], h["to"], h["cause"], h["detail"]] for h in s.get("history", [])]
        if rows:
            table(["at (UTC)", "from", "to", "cause", "detail"], rows)


def _path(topic: TopicName, subscription: str) -> str:
    return f"{topic_path(topic)}/subscription/{q(subscription)}/letterbox/circuit"


@admin_command(circuit, "get", "topic", TOPIC)
@click.argument("subscription")
def circuit_get(a: AdminContext, topic: TopicName, subscription: str) -> None:
    """Show the state, the failure window and the recent changes."""
    _show(a, a.client.get_json(_path(topic, subscription)) or {})


@admin_command(circuit, "open", "topic", TOPIC)
@click.argument("subscription")
def circuit_open(a: AdminContext, topic: TopicName, subscription: str) -> None:
    """Stop dispatching to the subscription (a probe goes out after the cool-down)."""
    _show(a, a.client.post_json(_path(topic, subscription), {"state": "open"}) or {})


@admin_command(circuit, "close", "topic", TOPIC)
@click.argument("subscription")
def circuit_close(a: AdminContext, topic: TopicName, subscription: str) -> None:
    """Resume dispatching to the subscription now."""
    _show(a, a.client.post_json(_path(topic, subscription), {"state": "closed"}) or {})
