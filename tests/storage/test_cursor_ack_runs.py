"""ManagedCursor.ack adds the consecutive ids of an ack request as one range each: the
acknowledged set, the mark-delete position, the ranges' shape (merged, never adjacent) and
whether the cursor becomes dirty are what acking the ids one by one gives -- checked against
a plain set over random requests (in order, reversed, shuffled, duplicates, ids already
acknowledged, gaps)."""
from __future__ import annotations

import random
from typing import Any

from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.storage.position import Position


class FakeLedger:
    ledger_id = 1
    name = "t"

    @property
    def last_confirmed(self) -> Position:
        return Position(1, 10_000)

    def count_messages(self, after_entry_id: int) -> int:
        return max(0, 10_000 - after_entry_id)

    def messages_between(self, first: int, last: int) -> int:
        return max(0, last - first + 1)

    def _schedule_trim(self) -> None:
        pass

    def _cursor_clean(self, cursor: ManagedCursor) -> None:
        pass

    def _write(self, ops: Any) -> Any:
        raise AssertionError("not written here")


def test_ack_runs_match_acking_one_by_one() -> None:
    rng = random.Random(13)
    dirty: list[ManagedCursor] = []
    for _trial in range(300):
        md0 = rng.randrange(-1, 5)
        c = ManagedCursor(FakeLedger(), "c", md0, dirty.append)
        model = set(range(-1, md0 + 1))
        for _req in range(rng.randrange(1, 8)):
            lo = rng.randrange(0, 60)
            ids = list(range(lo, lo + rng.randrange(1, 25)))
            if rng.random() < 0.3:
                ids = [e for e in ids if rng.random() < 0.7]  # gaps
            shape = rng.random()
            if shape < 0.2:
                ids.reverse()
            elif shape < 0.4:
                rng.shuffle(ids)
            if ids and rng.random() < 0.3:
                ids.append(rng.choice(ids))  # a duplicate
            before = set(model)
            dirty.clear()
            c._dirty = False
            c.ack(ids)
            model.update(ids)
            md = md0
            while md + 1 in model:
                md += 1
            assert c.mark_delete.entry_id == md
            assert [e for e in range(0, 100) if c.is_acked(e)] == sorted(e for e in model if 0 <= e < 100)
            starts, ends = c._ranges.starts, c._ranges.ends
            assert all(s <= e for s, e in zip(starts, ends, strict=True))
            assert all(ends[i] + 1 < starts[i + 1] for i in range(len(starts) - 1))  # merged, not adjacent
            assert not starts or starts[0] > md + 1
            assert bool(dirty) == (model != before)
            md0 = md
