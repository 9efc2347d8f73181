# The record of one durable cursor: the row `cursors.state` (schema.py), versioned JSON
#   {"v": 3, "md": mark-delete entry id, "batches": [[entry, size, acked mask], ...],
#    "props": {name: int}, "ranges": [[first, last], ...]}
# Version 3 leaves the delivery state out: it is in the rows of `deliveries` and
# `attempt_logs` (delivery_rows.py, attempt_log.py). Versions 1 and 2 (written by older
# brokers) held it in the record too ("rc"; "c", "ic", "t", "d", "a"): `parse` returns the
# whole document so the delivery state can be read from it (delivery_state.from_doc).
# Invariant: a record that does not parse raises DataDirDamaged naming the subscription.
from __future__ import annotations

import json
from typing import Any

from .errors import DataDirDamaged

STATE_VERSION = 3


class Record:
    __slots__ = ("batches", "doc", "md", "props", "ranges", "version")

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.version = int(doc.get("v", 0))
        if self.version > STATE_VERSION:
            raise ValueError(f"unsupported state version {doc['v']}")
        self.md = int(doc["md"])
        self.ranges = [(int(s), int(e)) for s, e in doc.get("ranges", [])]
        self.batches = {int(e): (int(s), int(m)) for e, s, m in doc.get("batches", [])}
        self.props = {str(k): int(v) for k, v in doc.get("props", {}).items()}

    @property
    def holds_deliveries(self) -> bool:
        """Whether the delivery state is in the record (versions 1 and 2), not in rows."""
        return self.version < 3


def encode(md: int, batches: dict[int, tuple[int, int]], props: dict[str, int], ranges_text: str) -> bytes:
    """The record's bytes; `ranges_text` the ranges' JSON list (range_text.py caches it)."""
    doc: dict[str, Any] = {
        "v": STATE_VERSION,
        "md": md,
        "batches": [[eid, size, mask] for eid, (size, mask) in sorted(batches.items())],
        "props": props,
    }
    text = json.dumps(doc, separators=(",", ":"))
    return f'{text[:-1]},"ranges":{ranges_text}}}'.encode()


def parse(state: bytes, subscription: str, topic: str) -> Record:
    try:
        return Record(json.loads(state))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a damaged record
        raise damaged(subscription, topic, exc) from None


def damaged(subscription: str, topic: str, exc: Exception) -> DataDirDamaged:
    return DataDirDamaged(f"the record of subscription {subscription} of topic {topic} in letterbox.db does "
                          f"not parse ({exc}); run `letterbox verify` on the stopped broker's data dir "
                          "and restore a backup (`letterbox restore`)")
