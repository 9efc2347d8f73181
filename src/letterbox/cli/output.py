# Output helpers shared by `letterbox admin`, `produce` and `consume`: plain
# tables, `key: value` blocks and JSON, written with click.echo so click's test
# runner captures them.
from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

OUTPUT_CHOICE = click.Choice(["human", "json"], case_sensitive=False)


def echo_json(value: Any, *, compact: bool = False) -> None:
    if compact:
        click.echo(json.dumps(value, separators=(",", ":"), sort_keys=False))
    else:
        click.echo(json.dumps(value, indent=2, sort_keys=False))


def fmt(value: Any) -> str:
    """One cell: numbers without noise, containers as compact JSON."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


# C0 and C1 control characters and DEL, shown escaped in table cells: client-supplied text
# (a nack's reason, a key) must not add rows to a table or drive the operator's terminal
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_CONTROL.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> None:
    cells = [[fmt(c).translate(_CONTROL) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    click.echo(indent + "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def key_values(items: Mapping[str, Any], indent: str = "", *, nested: bool = False) -> None:
    """`key: value` lines for the scalar entries of a mapping (all entries if nested)."""
    scalars = {k: v for k, v in items.items() if nested or not isinstance(v, dict | list)}
    if not scalars:
        return
    width = max(len(k) for k in scalars)
    for k, v in scalars.items():
        click.echo(f"{indent}{(k + ':').ljust(width + 1)} {fmt(v)}")


def properties_text(props: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in props.items()) if props else "-"


def payload_text(payload: bytes) -> str:
    """A payload for a terminal: UTF-8 text as is, anything else as hex."""
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary, {len(payload)} bytes) {payload.hex()}"


def payload_json(payload: bytes) -> dict[str, str | None]:
    """A payload for JSON output: `payload` (UTF-8 text, or null) and `payloadBase64`."""
    try:
        text: str | None = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"payload": text, "payloadBase64": base64.b64encode(payload).decode()}


def format_epoch_ms(ms: Any) -> str:
    """Epoch milliseconds as a local ISO time with milliseconds; `-` for 0 or none."""
    from datetime import datetime

    try:
        value = int(ms)
    except (TypeError, ValueError):
        return "-"
    if value <= 0:
        return "-"
    return datetime.fromtimestamp(value / 1000).astimezone().isoformat(timespec="milliseconds")
