# Dead-letter moves of one subscription gathered into batches: one move (one storage
# transaction, one commit) at a time per subscription, and the requests that come while it
# is in flight (its cursor is locked until the commit) wait in one batch per target and go
# together in the next move. A busy subscription then pays one commit cycle per batch
# instead of one per request, each message still moved atomically (its DLQ append and its
# ack commit together: dead_letter_router.py).
# Invariants: a request's future resolves only after the move that holds its entries
# committed (with the messages moved by that move), or with that move's error, its entries
# then left unacknowledged as with a move of their own; batches go in the order of their
# first request; requests with a description or extra stamps are not batched (the
# redelivery tracker's are neither).
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letter_router import move_to_dead_letter

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedSubscription

_Target = tuple[str, str | None, str | None]  # reason, dead letter topic, its initial subscription


class _Batch:
    __slots__ = ("done", "ids")

    def __init__(self, done: asyncio.Future[int]) -> None:
        self.ids: list[int] = []
        self.done = done


class DeadLetterBatches:
    def __init__(self, sub: MovedSubscription) -> None:
        self.sub = sub
        self._waiting: dict[_Target, _Batch] = {}
        self._moving = False

    def move(self, entry_ids: list[int], reason: str, dlq_topic: str | None,
             initial_subscription: str | None) -> asyncio.Future[int]:
        """Move the entries in the subscription's next move to `dlq_topic`; resolves to the
        messages that move moved (0: none, nothing committed) once it committed."""
        target = (reason, dlq_topic, initial_subscription)
        batch = self._waiting.get(target)
        if batch is None:
            batch = self._waiting[target] = _Batch(asyncio.get_running_loop().create_future())
        batch.ids.extend(entry_ids)
        if not self._moving:
            self._moving = True
            self.sub.topic.service.track(asyncio.ensure_future(self._drain()))
        return batch.done

    async def _drain(self) -> None:
        try:
            while self._waiting:
                target = next(iter(self._waiting))
                batch = self._waiting.pop(target)
                try:
                    moved = await move_to_dead_letter(self.sub, batch.ids, *target)
                except asyncio.CancelledError:
                    batch.done.cancel()
                    raise
                except Exception as exc:
                    if not batch.done.done():
                        batch.done.set_exception(exc)
                else:
                    if not batch.done.done():
                        batch.done.set_result(moved)
        finally:
            self._moving = False
            for batch in self._waiting.values():  # cancelled (the broker stops): nothing moved
                batch.done.cancel()
            self._waiting.clear()
