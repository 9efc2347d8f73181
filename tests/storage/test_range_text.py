"""The cursor record's "ranges" text is re-encoded only where the ranges changed and is
always exactly what json.dumps gives for the list of pairs (the record format stays)."""
from __future__ import annotations

import json
import random

from letterbox.storage.ack_ranges import RangeSet
from letterbox.storage.range_text import BUCKET_IDS, RangeText


def test_text_equals_json_dumps_through_random_changes() -> None:
    rnd = random.Random(7)
    ranges = RangeSet()
    text = RangeText()
    assert text.encode(ranges) == "[]"
    for step in range(300):
        for _ in range(rnd.randint(1, 50)):
            ranges.add(rnd.randrange(0, 6 * BUCKET_IDS))
        if step % 50 == 49:
            ranges.absorb_from(rnd.randrange(0, 6 * BUCKET_IDS))
        got = text.encode(ranges)
        assert got == json.dumps(ranges.to_list(), separators=(",", ":"))
        assert RangeSet([tuple(p) for p in json.loads(got)]).to_list() == ranges.to_list()


def test_unchanged_buckets_reuse_their_text() -> None:
    ranges = RangeSet([(i, i) for i in range(0, 3 * BUCKET_IDS, 2)])
    text = RangeText()
    text.encode(ranges)
    before = dict(text._buckets)
    ranges.add(2 * BUCKET_IDS + 1)  # only the third bucket changes
    assert text.encode(ranges) == json.dumps(ranges.to_list(), separators=(",", ":"))
    assert text._buckets[0][2] is before[0][2] and text._buckets[1][2] is before[1][2]
    assert text._buckets[2][2] is not before[2][2]
