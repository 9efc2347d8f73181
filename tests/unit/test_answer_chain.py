"""A producer's answer chain without sockets (broker/connection/answer_chain.py): an answer
whose place comes first is written at once, in the caller's own callback; one whose place
is behind an unwritten answer waits for it, so answers leave in the order their places were
taken, whatever order their commits come back in."""
from __future__ import annotations

import asyncio

from letterbox.broker.connection.answer_chain import answer, take_place
from letterbox.broker.topics.producer import Producer


def _producer() -> Producer:
    return Producer(cnx=None, producer_id=1, name="p", topic=None)  # type: ignore[arg-type]


def test_a_place_behind_written_ones_is_written_at_once_and_marks_itself_written() -> None:
    async def run() -> None:
        p = _producer()
        written: list[str] = []
        place = take_place(p)
        answer(place, lambda: written.append("first"))
        assert written == ["first"]  # no loop pass in between
        assert place[1].done() and p.last_receipt is place[1]
        second = take_place(p)  # the one before is written: nothing to wait for
        answer(second, lambda: written.append("second"))
        assert written == ["first", "second"]

    asyncio.run(run())


def test_answers_leave_in_place_order_whatever_order_they_are_given() -> None:
    async def run() -> None:
        p = _producer()
        written: list[str] = []
        a, b, c = take_place(p), take_place(p), take_place(p)
        answer(c, lambda: written.append("c"))
        answer(b, lambda: written.append("b"))
        assert written == []  # both wait for a
        answer(a, lambda: written.append("a"))
        assert written == ["a"]
        await c[1]
        assert written == ["a", "b", "c"]

    asyncio.run(run())

