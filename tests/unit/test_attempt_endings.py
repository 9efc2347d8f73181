"""letterbox.failure.attempts: the ending of an attempt mapped from the failure events,
the reason bounds and the DELIVERY_ATTEMPTS property."""
from __future__ import annotations

import pytest

from letterbox import failure
from letterbox.failure.attempts import (
    ACK_TIMEOUT,
    CONSUMER_GONE,
    EXPIRED,
    MAX_REASON_CHARS,
    NACK,
    TERMINATED,
    Attempt,
    attempts_property,
    clip_reason,
    ending_for,
    last_reason,
    parse_attempts_property,
)
from letterbox.failure.stamps import REDRIVE_REMOVES, redriven_properties
from letterbox.message_properties import DELIVERY_ATTEMPTS, FAILURE_DESCRIPTION


def test_endings_from_events() -> None:
    assert ending_for(failure.Nack()) == NACK  # a plain client: the wire cannot tell
    assert ending_for(failure.Nack(), announces=True) == ACK_TIMEOUT  # not announced
    assert ending_for(failure.Nack(), announced=NACK, announces=True) == NACK
    assert ending_for(failure.RedeliverAll(), announces=True) == ACK_TIMEOUT
    assert ending_for(failure.AckTimeout()) == ACK_TIMEOUT
    assert ending_for(failure.ConsumerGone()) == CONSUMER_GONE
    assert ending_for(failure.Terminate("x")) == TERMINATED
    assert ending_for(failure.Expired()) == EXPIRED
    with pytest.raises(TypeError):
        ending_for(failure.Dispatch())


def test_reasons_are_bounded() -> None:
    assert clip_reason("") is None and clip_reason(None) is None
    long = clip_reason("x" * 5000)
    assert long is not None and len(long) == MAX_REASON_CHARS


def test_property_round_trip_and_redrive_strips_it() -> None:
    attempts = [Attempt(1, 2, "c", "1.2.3.4:5", NACK, "bad json"), Attempt(3, 4, "c", None, ACK_TIMEOUT)]
    text = attempts_property(attempts)
    assert " " not in text.replace("bad json", "")  # compact
    assert parse_attempts_property(text) == attempts
    assert parse_attempts_property("not json") == []
    assert last_reason(attempts) == "bad json"
    assert {DELIVERY_ATTEMPTS, FAILURE_DESCRIPTION} <= REDRIVE_REMOVES
    assert redriven_properties({DELIVERY_ATTEMPTS: text, FAILURE_DESCRIPTION: "x", "app": "1"}) == {"app": "1"}


@pytest.mark.parametrize("description", [None, "", "told by the client"])
def test_dead_letter_stamps_from_stored_rows_are_the_stamps_from_attempts(description: str | None) -> None:
    """A max-redeliveries move stamps its dead letter from the log's stored rows, without
    making an Attempt per row: the same DELIVERY_ATTEMPTS text and FAILURE_DESCRIPTION."""
    from letterbox.failure.attempts import Attempt, attempts_property, attempts_property_rows

    odd = [None, "c-1", 'q"uote\\ \u00e9\u2713', "127.0.0.1:5"]
    for n in range(6):
        rows = tuple((1_700_000_000_000 + i if i % 3 else 0, 17 + i, odd[i % 4], odd[(i + 1) % 4],
                      "nack" if i % 2 else "ack-timeout", odd[(i + 2) % 4] if i < n - 1 else None)
                     for i in range(n))
        attempts = [Attempt.from_row(r) for r in rows]
        assert attempts_property_rows(rows) == attempts_property(attempts)
        want = failure.dead_letter_stamps("max-redeliveries", 5, "work", 4, 1, 2, description, attempts)
        got = failure.dead_letter_stamps("max-redeliveries", 5, "work", 4, 1, 2, description, attempt_rows=rows)
        assert got == want
        assert (DELIVERY_ATTEMPTS in got) == bool(n)
