"""DELIVERY_ATTEMPTS written from stored rows (attempts_property_rows) is the text json.dumps
gives for the rows' objects, for every kind of value a stored row can hold."""
from __future__ import annotations

import json
import random
from typing import Any

from letterbox.failure.attempts import (
    MAX_ATTEMPTS_STAMP_BYTES,
    Attempt,
    attempts_property,
    attempts_property_rows,
)


def reference(rows: list[tuple[Any, ...]]) -> str:
    """json.dumps of the objects of the newest rows whose text fits MAX_ATTEMPTS_STAMP_BYTES."""
    objects = [{"deliveredAt": int(d) or None, "endedAt": int(e) or None, "consumer": c, "address": a,
                "ending": str(n), "reason": r} for d, e, c, a, n, r in rows]
    for start in range(len(objects)):
        text = json.dumps(objects[start:], separators=(",", ":"), ensure_ascii=False)
        if len(text.encode()) <= MAX_ATTEMPTS_STAMP_BYTES or start == len(objects) - 1:
            return text
    return "[]"


TEXTS: list[Any] = [None, "", "c-1", "127.0.0.1:5555", 'q"uote\\ back', "tab\tnew\nline\x00\x1f", "\u00e9\u2713\U0001f600",
                    "\u2028\u2029", "x" * 1000]
ODD: list[Any] = [7, 1.5, True, ["a", 1], {"k": "v"}]  # not what the broker writes, but a row read back may hold them


def test_rows_text_is_json_dumps_of_the_objects() -> None:
    rng = random.Random(13)
    for n in range(200):
        rows = []
        for _ in range(n % 7):
            rows.append((rng.choice([0, 1, 1_700_000_000_000, True, 2.9]), rng.choice([0, 17, 1_700_000_000_123]),
                         rng.choice(TEXTS + ODD), rng.choice(TEXTS + ODD), rng.choice(["nack", "ack-timeout", 5]),
                         rng.choice(TEXTS + ODD)))
        got = attempts_property_rows(tuple(rows))
        assert got == reference(rows)
        assert json.loads(got) == json.loads(reference(rows))


def test_rows_text_is_the_attempts_text() -> None:
    rows = ((1_700_000_000_000, 1_700_000_000_100, "c-1", "127.0.0.1:1", "nack", None),
            (0, 1_700_000_000_200, None, None, "ack-timeout", "r\u00e9ason \"quoted\""))
    assert attempts_property_rows(rows) == attempts_property([Attempt.from_row(r) for r in rows])
    assert attempts_property_rows(()) == "[]"
