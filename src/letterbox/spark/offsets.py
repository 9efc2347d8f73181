# Positions in a topic partition, as the Spark source uses them.
#
# A position is (ledger_id, entry_id) of an entry; a Spark offset for one
# partition is the position of the *next* entry to read, so a range
# [start, end) holds whole entries (a producer batch is one entry and is never
# split between two micro-batches). EARLIEST (-1, -1) means "before the first
# entry". Offsets travel as JSON: {"<partition topic>": [ledger, entry], ...}.
#
# Sequence ids for idempotent re-publishing are derived from a source message
# position (`sequence_id_for`): they grow with the position, so a producer
# whose name is tied to one source partition re-sends the same ids when a
# Spark task is retried and the broker's deduplication drops the repeats.
from __future__ import annotations

import json
from typing import Any, NamedTuple


class Position(NamedTuple):
    ledger: int
    entry: int

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}"

    @property
    def is_earliest(self) -> bool:
        return self.ledger < 0

    def to_json(self) -> list[int]:
        return [self.ledger, self.entry]


EARLIEST = Position(-1, -1)

# bit layout of derived sequence ids: ledger | entry | batch index + 1
_LEDGER_BITS, _ENTRY_BITS, _BATCH_BITS = 22, 29, 12


class OffsetError(ValueError):
    """An offset given by the user (or found in a checkpoint) cannot be used."""


def parse_position(value: Any, where: str) -> Position:
    """`"L:E"`, `"L:E:P:B"` (a message id as ORIGIN_MESSAGE_ID writes it) or `[L, E]`."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return Position(int(value[0]), int(value[1]))
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) in (2, 4):
            try:
                return Position(int(parts[0]), int(parts[1]))
            except ValueError:
                pass
    raise OffsetError(
        f"{where}: {value!r} is not a message position; write \"ledger:entry\" "
        "(or \"ledger:entry:partition:batch\", or [ledger, entry])"
    )


def offsets_to_json(offsets: dict[str, Position]) -> dict[str, list[int]]:
    return {topic: pos.to_json() for topic, pos in sorted(offsets.items())}


def offsets_from_json(raw: dict[str, Any]) -> dict[str, Position]:
    return {topic: parse_position(v, f"offset of {topic}") for topic, v in raw.items()}


def entries_between(start: Position, end: Position) -> int:
    """How many entries [start, end) holds (an estimate when the ledger changed)."""
    if end.is_earliest or end <= start:
        return 0
    if start.is_earliest or start.ledger != end.ledger:
        return max(0, end.entry)
    return end.entry - start.entry


def advance(start: Position, end: Position, n: int) -> Position:
    """The position n entries after start, never past end."""
    if n <= 0:
        return start
    if start.is_earliest or start.ledger != end.ledger:
        return end if end.entry <= n else Position(end.ledger, n)
    return min(end, Position(start.ledger, start.entry + n))


def parse_offsets_option(text: str, option: str) -> dict[str, dict[int, Position | str]]:
    """A starting_offsets / ending_offsets JSON: {"topic": {"partition": pos}}.

    A position is "earliest", "latest", "L:E" or [L, E]; partition is the
    partition index, "-1" for a non-partitioned topic.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetError(f"option {option}: not 'earliest', 'latest' or JSON ({exc.msg})") from None
    if not isinstance(raw, dict):
        raise OffsetError(f'option {option}: JSON must be an object {{"topic": {{"0": "ledger:entry"}}}}')
    out: dict[str, dict[int, Position | str]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise OffsetError(f"option {option}: the value for {topic!r} must be an object of partition -> position")
        per: dict[int, Position | str] = {}
        for p, v in parts.items():
            try:
                idx = int(p)
            except ValueError:
                raise OffsetError(f"option {option}: partition {p!r} of {topic!r} is not an integer") from None
            if v in ("earliest", "latest"):
                per[idx] = str(v)
            else:
                per[idx] = parse_position(v, f"option {option}, {topic} partition {p}")
        out[topic] = per
    return out


def sequence_id_for(ledger: int, entry: int, batch_index: int) -> int:
    """A sequence id that grows with the source message position."""
    b = batch_index + 1
    if not (0 <= ledger < 1 << _LEDGER_BITS and 0 <= entry < 1 << _ENTRY_BITS and 0 <= b < 1 << _BATCH_BITS):
        raise OffsetError(
            f"message position {ledger}:{entry}:{batch_index} is outside the range that derived "
            f"sequence ids cover (ledger < 2^{_LEDGER_BITS}, entry < 2^{_ENTRY_BITS}, batch < 4095)"
        )
    return (ledger << (_ENTRY_BITS + _BATCH_BITS)) | (entry << _BATCH_BITS) | b
