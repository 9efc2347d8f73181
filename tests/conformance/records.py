"""Making what a client saw comparable across two brokers.

Owns the normal form of a record (see conformance/README.md): topic names with the run's prefix
replaced by `{p}`, message ids reduced to their presence, properties kept by name. A record is
plain JSON (dicts with string keys, lists, strings, numbers, booleans, None)."""
from __future__ import annotations

import re
from typing import Any

ID_PROPERTIES = frozenset({"ORIGIN_MESSAGE_ID", "origin_message_id", "MESSAGE_ID"})
ID_RE = re.compile(r"^\(?-?\d+,-?\d+,-?\d+,-?\d+\)?$|^\d+:\d+:-?\d+(:-?\d+)?$")


def norm_text(value: str, prefix: str) -> str:
    """A string with the run's topic prefix replaced by {p}, in both persistent:// and short form."""
    short = prefix.removeprefix("persistent://public/default/")
    return value.replace(prefix, "{p}").replace(short, "{p}")


def norm_props(props: dict[str, str], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in sorted(props.items()):
        if k in ID_PROPERTIES or ID_RE.match(v):
            out[k] = "<id>"
        else:
            out[k] = norm_text(v, prefix)
    return out


def message(msg: Any, prefix: str, *, props: bool = True, key: bool = True, count: bool = True) -> dict[str, Any]:
    """One received pulsar.Message as a record: payload text, and what the caller keeps."""
    rec: dict[str, Any] = {"data": msg.data().decode(errors="replace")}
    if key:
        rec["key"] = msg.partition_key() or None
    if count:
        rec["redelivery_count"] = msg.redelivery_count()
    if props:
        rec["props"] = norm_props(dict(msg.properties()), prefix)
    return rec


def error_name(exc: BaseException) -> str:
    """The client's error type, as a name both brokers' answers can be compared by."""
    return type(exc).__name__


def diff(a: Any, b: Any, path: str = "$") -> list[str]:
    """Where two records differ, as JSON paths with both values (empty when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: {a.get(k, '<absent>')!r} != {b.get(k, '<absent>')!r}")
            else:
                out.extend(diff(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
