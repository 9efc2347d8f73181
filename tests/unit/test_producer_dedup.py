"""A producer's duplicate judgement (broker.topics.producer.Producer.pushes), pure: the chunks of
one message share its sequence id, so its later chunks are pushed, a resent chunked message is
dropped chunk by chunk, and a whole message is never parsed for its chunk id."""
from __future__ import annotations

from typing import Any

from letterbox.broker.topics.producer import Producer


def _producer() -> Producer:
    return Producer(cnx=None, producer_id=1, name="p", topic=None)  # type: ignore[arg-type]


def _never() -> int | None:
    raise AssertionError("a SEND above the highest sequence id is not parsed")


def test_chunks_of_the_message_pushed_last_are_pushed_and_a_resend_is_dropped() -> None:
    p = _producer()
    assert p.pushes(5, 5, True, _never)  # chunk 0 of message 5
    assert [p.pushes(5, 5, True, lambda c=c: c) for c in (1, 2)] == [True, True]
    assert [p.pushes(5, 5, True, lambda c=c: c) for c in (0, 1, 2)] == [False, False, False]  # resent
    assert p.pushes(6, 6, True, _never)
    assert not p.pushes(5, 5, True, lambda: 1)  # a late chunk of an older message
    assert not p.pushes(6, 6, True, lambda: None)  # a whole message resent


def test_without_deduplication_everything_is_pushed_and_the_highest_still_moves() -> None:
    p = _producer()
    calls: list[Any] = []
    assert p.pushes(3, 4, False, lambda: calls.append(1))
    assert p.pushes(2, 2, False, lambda: calls.append(1))
    assert p.highest_sequence_pushed == 4 and calls == []
