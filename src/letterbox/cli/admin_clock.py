# `letterbox admin clock get` and `letterbox admin clock advance DURATION`: read and
# move the broker's clock (GET /admin/v2/letterbox/clock, POST .../advance?ms=N).
# Advancing needs a broker started with --clock manual --allow-test-clock (tests
# only, docs/testing.md); the broker's refusal (409) is shown as it says it.
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json, key_values
from letterbox.failure import PolicyError, parse_duration_ms

CLOCK_PATH = "/admin/v2/letterbox/clock"


def _show(a: AdminContext, state: dict[str, Any]) -> None:
    if a.json:
        echo_json(state)
        return
    now = state.get("nowMs")
    shown = dict(state)
    if isinstance(now, int):
        shown["now"] = datetime.fromtimestamp(now / 1000, UTC).isoformat(timespec="milliseconds")
    key_values(shown)


@click.group()
def clock() -> None:
    """The broker's clock (a manual clock, for tests, moves only when advanced)."""


@admin_command(clock, "get")
def clock_get(a: AdminContext) -> None:
    """Show the broker's clock: real or manual, its time, its pending timers."""
    _show(a, a.client.get_json(CLOCK_PATH))


@admin_command(clock, "advance", "duration")
def clock_advance(a: AdminContext, duration: str) -> None:
    """Move a manual clock DURATION on (500ms, 30s, 10m, 2h, 1d; a bare number is ms)."""
    try:
        ms = parse_duration_ms(duration, "ms", whole=True)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="DURATION") from None
    _show(a, a.client.post_json(f"{CLOCK_PATH}/advance?ms={ms}", None))
