# A producer's answers leave in send order: every SEND_RECEIPT, duplicate answer and
# SEND_ERROR of one producer takes its place in one chain (answer_chain.py), so an answer
# given from memory (a duplicate, a refusal) never overtakes a receipt still waiting for its
# fsync. The official clients match answers against their oldest pending message (the Java
# client acts on a ChecksumError only when it is for that message).
#
# Invariant: before anything is chained, the producer's reserved appends are submitted
# (send_batch.submit_producer), so their receipts already hold their places.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from letterbox.broker.connection import send_batch
from letterbox.broker.connection.answer_chain import answer, take_place
from letterbox.protocol import commands

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.broker.topics.producer import Producer
    from letterbox.errors import ServerError
    from letterbox.storage.position import Position

U64 = (1 << 64) - 1


def in_order(cnx: ServerCnx, p: Producer, write: Callable[[], None]) -> None:
    """Call `write` once every earlier answer of the producer (of `cnx`) has been written."""
    send_batch.submit_producer(cnx, p)
    answer(take_place(p), write)


def error_in_order(cnx: ServerCnx, p: Producer, seq: int, code: ServerError, text: str) -> None:
    """SEND_ERROR for the producer's SEND `seq`, after the answers to its earlier SENDs."""
    in_order(cnx, p, lambda: cnx.send(commands.send_error(p.producer_id, seq, code, text)))


def chain(
    cnx: ServerCnx, p: Producer, fut: asyncio.Future[Position] | None, seq: int, highest: int | None,
    pending_bytes: int = 0,
) -> None:
    """Send the receipt for `fut` (or a duplicate receipt if None) after all earlier answers;
    `pending_bytes` are given back to the connection's flow control once `fut` is done."""
    if fut is None:
        # duplicate: answer with (-1, -1) as Pulsar does, after anything still in flight
        in_order(cnx, p, lambda: cnx.send(commands.send_receipt(p.producer_id, seq, U64, U64, highest)))
        return
    place = take_place(p)

    def on_durable(f: asyncio.Future[Position]) -> None:
        cnx.flow.publish_done(pending_bytes)
        if f.cancelled() or f.exception() is not None:
            err = f.exception() if not f.cancelled() else None
            answer(place, lambda: send_batch.refuse_unstored(cnx, p, [seq], err))
            return
        pos = f.result()
        answer(place, lambda: cnx.send(commands.send_receipt(p.producer_id, seq, pos.ledger_id, pos.entry_id, highest)))

    fut.add_done_callback(on_durable)
