# The one duration parser of the failure policies (delay levels, pipeline
# delays, CLI options): a number and an optional unit, ms s m h d w y. A bare
# number is read in `default_unit`. Results are whole milliseconds, or float
# seconds through parse_seconds; duration_label writes the shortest exact form
# back (5000 ms -> "5s"), as retry tier topic names use it.
from __future__ import annotations

import re

from letterbox.failure.errors import PolicyError

UNIT_MS = {
    "ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
    "w": 7 * 86_400_000, "y": 365 * 86_400_000,
}
_DURATION_RE = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w|y)?\s*", re.IGNORECASE)
HINT = "write a number and a unit (ms, s, m, h, d), e.g. 500ms, 5s, 2m, 1h"


def parse_duration_ms(
    text: str, default_unit: str = "s", *, allow_negative: bool = False, whole: bool = False
) -> int:
    """`"5s"` -> 5000; a bare number is in `default_unit`; `whole` refuses fractions
    (`1.5h`); raises PolicyError naming the expected form."""
    m = _DURATION_RE.fullmatch(text) if isinstance(text, str) else None
    if not m or (whole and "." in m.group(1)):
        raise PolicyError(f"{text!r} is not a duration; {HINT}")
    number = float(m.group(1))
    if number < 0 and not allow_negative:
        raise PolicyError(f"{text!r} is negative; {HINT}")
    return round(number * UNIT_MS[(m.group(2) or default_unit).lower()])


def parse_seconds(text: str, default_unit: str = "s") -> float:
    return parse_duration_ms(text, default_unit) / 1000


def duration_label(seconds: float) -> str:
    ms = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
