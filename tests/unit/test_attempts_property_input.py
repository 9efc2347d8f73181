"""A dead letter's DELIVERY_ATTEMPTS property is text any producer on the dead letter topic
can set: read back (REST attempts view, console, Spark's delivery_attempts column) a value
of the wrong type or out of range is dropped, never an exception. Before, a non-string
consumer/address/reason broke the Spark read of the whole DLQ (ArrowTypeError), and an
Infinity or 1e30 time raised OverflowError out of parse_attempts_property (a 500 on
GET .../letterbox/attempts/{id})."""
from __future__ import annotations

import pyarrow as pa
import pytest

from letterbox.failure.attempts import Attempt, parse_attempts_property
from letterbox.spark.schema import ATTEMPTS_ARROW_TYPE, attempts_column

HOSTILE = [
    '[{"deliveredAt": 1, "consumer": 5}]',
    '[{"deliveredAt": 1e30}]',
    '[{"deliveredAt": Infinity, "endedAt": -Infinity}]',
    '[{"deliveredAt": NaN}]',
    '[{"deliveredAt": 9223372036854775807}]',
    '[{"deliveredAt": -5, "endedAt": "12"}]',
    '[{"deliveredAt": true, "address": true, "reason": {"a": 1}, "ending": ["x"]}]',
    '[{"consumer": "w", "ending": "nack"}, 7, "x", null]',
    '{"deliveredAt": 1}',
    '12',
    'not json',
    '[' * 100_000,
]


@pytest.mark.parametrize("value", HOSTILE, ids=[v[:40] for v in HOSTILE])
def test_hostile_delivery_attempts_read_as_clean_attempts(value: str) -> None:
    attempts = parse_attempts_property(value)
    for a in attempts:
        assert isinstance(a, Attempt)
        for t in (a.delivered_at_ms, a.ended_at_ms):
            assert type(t) is int and 0 <= t < 2**53
        for text in (a.consumer, a.address, a.reason):
            assert text is None or isinstance(text, str)
        assert isinstance(a.ending, str)
        a.to_json()
    rows = attempts_column({"DELIVERY_ATTEMPTS": value})
    assert rows is not None
    pa.array([rows], type=ATTEMPTS_ARROW_TYPE)  # what the Spark source builds


def test_good_delivery_attempts_are_kept() -> None:
    value = ('[{"deliveredAt":1700000000000,"endedAt":1700000000500,"consumer":"w-1",'
             '"address":"10.0.0.7:53122","ending":"nack","reason":"bad json"}]')
    assert parse_attempts_property(value) == [
        Attempt(1700000000000, 1700000000500, "w-1", "10.0.0.7:53122", "nack", "bad json")]
