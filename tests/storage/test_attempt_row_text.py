"""An attempt row's stored text (attempt_log._row_text, written without the JSON encoder's
per-call set-up) is exactly what the encoder gives, for every kind of value a row can hold."""
from __future__ import annotations

import json
import random
from typing import Any

from letterbox.storage import attempt_log

VALUES: list[Any] = [None, 0, 1_700_000_000_000, -5, 2**70, True, False, 1.5, float("inf"), "", "c-1",
                     'q"uote\\', "tab\tline\n\x00\x1f", "\u00e9\u2713\U0001f600", "\u2028", ["x", 1], {"k": None}]


def test_row_text_is_the_encoders_text() -> None:
    rng = random.Random(14)
    for _ in range(3000):
        n = rng.choice([6, 6, 6, 5, 7, 0])
        row = tuple(rng.choice(VALUES) for _ in range(n))
        want = json.dumps(row, separators=(",", ":"), ensure_ascii=False)
        assert attempt_log._fast_row_text(row) == want
        # the cache keys rows by equality (as before this encoder): it needs hashable rows, and
        # a row with False or 1.0 would share 0's or 1's text -- the broker writes neither
        if not any(isinstance(v, (list, dict, bool, float)) for v in row):
            assert attempt_log._row_text(row) == want
    rows = ((1, 2, "c", "a", "nack", None), (3, 4, None, None, "ack-timeout", "why \u00e9"))
    assert attempt_log.encode(rows) == json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
    assert attempt_log.decode(attempt_log.encode(rows)) == rows
