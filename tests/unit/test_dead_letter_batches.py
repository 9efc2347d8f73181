"""Dead-letter moves of one subscription, batched (moves/dead_letter_batches.py): one move
at a time; the requests made while it is in flight go together in the next one (one per
target), each request resolved only once the move holding its entries is done, with its
result or its error. No broker: the move itself is a stand-in that waits for the test."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from letterbox.broker.moves import dead_letter_batches
from letterbox.broker.moves.dead_letter_batches import DeadLetterBatches


class Moves:
    """move_to_dead_letter's stand-in: each call waits until the test lets it commit."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], str, str | None]] = []
        self.release: list[asyncio.Future[int | BaseException]] = []

    async def __call__(self, sub: Any, ids: list[int], reason: str, dlq: str | None, initial: str | None) -> int:
        self.calls.append((list(ids), reason, dlq))
        gate: asyncio.Future[int | BaseException] = asyncio.get_running_loop().create_future()
        self.release.append(gate)
        outcome = await gate
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _sub() -> Any:
    tasks: list[asyncio.Future[None]] = []
    return SimpleNamespace(topic=SimpleNamespace(service=SimpleNamespace(track=tasks.append)))


async def _turn() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_requests_made_while_a_move_is_in_flight_go_together_in_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    moves = Moves()
    monkeypatch.setattr(dead_letter_batches, "move_to_dead_letter", moves)

    async def body() -> None:
        batches = DeadLetterBatches(_sub())
        first = batches.move([1, 2], "max", None, None)
        await _turn()
        assert moves.calls == [([1, 2], "max", None)]
        second = batches.move([3], "max", None, None)  # the first move is in flight: they wait
        third = batches.move([4, 5], "max", None, None)
        other = batches.move([6], "max", "elsewhere", None)  # another target: a batch of its own
        await _turn()
        assert len(moves.calls) == 1 and not first.done()
        moves.release[0].set_result(2)
        await _turn()
        assert first.result() == 2
        assert moves.calls[1] == ([3, 4, 5], "max", None), "one move for the requests that waited"
        assert not second.done() and not third.done(), "resolved only once their move is done"
        moves.release[1].set_result(3)
        await _turn()
        assert second.result() == third.result() == 3
        assert moves.calls[2] == ([6], "max", "elsewhere")
        moves.release[2].set_exception(RuntimeError("target refused"))
        await _turn()
        with pytest.raises(RuntimeError, match="target refused"):
            other.result()
        again = batches.move([7], "max", None, None)  # idle again: a move of its own at once
        await _turn()
        assert moves.calls[3] == ([7], "max", None)
        moves.release[3].set_result(1)
        assert await again == 1

    asyncio.run(body())


def test_a_failed_move_fails_every_request_it_held(monkeypatch: pytest.MonkeyPatch) -> None:
    moves = Moves()
    monkeypatch.setattr(dead_letter_batches, "move_to_dead_letter", moves)

    async def body() -> None:
        batches = DeadLetterBatches(_sub())
        first = batches.move([1], "max", None, None)
        await _turn()
        a, b = batches.move([2], "max", None, None), batches.move([3], "max", None, None)
        moves.release[0].set_result(1)
        await _turn()
        moves.release[1].set_exception(OSError("disk full"))
        await _turn()
        assert first.result() == 1
        for f in (a, b):
            with pytest.raises(OSError, match="disk full"):
                f.result()

    asyncio.run(body())
