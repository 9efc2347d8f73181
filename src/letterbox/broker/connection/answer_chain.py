# One producer's answers (SEND_RECEIPT, a duplicate's receipt, SEND_ERROR) leave in send
# order: each takes a place in the producer's chain (Producer.last_receipt) when its SEND is
# handled, and is written only once the place before it has been written.
#
# Invariant: a place's future resolves only after its answer went to the connection's
# output, so "the place before is done" always means "its answer is written" -- whether it
# was written in the callback that took a commit back, or later, behind an earlier answer.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from letterbox.broker.topics.producer import Producer

Place = tuple["asyncio.Future[object] | None", "asyncio.Future[object]"]  # (the one before, this one)


def take_place(p: Producer) -> Place:
    """The next place in `p`'s chain: its answer goes after every answer already placed."""
    before = p.last_receipt
    mine: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    p.last_receipt = mine
    return before, mine


def answer(place: Place, write: Callable[[], None]) -> None:
    """Write now if the place before is written, otherwise right after it is."""
    before, mine = place

    def go(_before: object = None) -> None:
        write()
        mine.set_result(None)

    if before is None or before.done():
        go()
    else:
        before.add_done_callback(go)
