# A producer's answers leave in send order: every SEND_RECEIPT, duplicate answer and
# SEND_ERROR of one producer hangs off one chain of futures (Producer.last_receipt), so an
# answer given from memory (a duplicate, a refusal) never overtakes a receipt still waiting
# for its fsync. The official clients match answers against their oldest pending message
# (the Java client acts on a ChecksumError only when it is for that message).
#
# Invariant: before anything is chained, the producer's reserved appends are submitted
# (send_batch.submit_producer), so their receipts are already on the chain.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from letterbox.broker.connection import send_batch
from letterbox.protocol import commands

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.broker.topics.producer import Producer
    from letterbox.errors import ServerError
    from letterbox.storage.position import Position

U64 = (1 << 64) - 1


def in_order(cnx: ServerCnx, p: Producer, write: Callable[[], None]) -> None:
    """Call `write` once every earlier receipt of the producer (of `cnx`) has been written."""
    send_batch.submit_producer(cnx, p)
    prev = p.last_receipt
    if prev is None or prev.done():
        write()
        return
    done: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def after(_f: object) -> None:
        write()
        done.set_result(None)

    prev.add_done_callback(after)
    p.last_receipt = done


def error_in_order(cnx: ServerCnx, p: Producer, seq: int, code: ServerError, text: str) -> None:
    """SEND_ERROR for the producer's SEND `seq`, after the answers to its earlier SENDs."""
    in_order(cnx, p, lambda: cnx.send(commands.send_error(p.producer_id, seq, code, text)))


def chain(
    cnx: ServerCnx, p: Producer, fut: asyncio.Future[Position] | None, seq: int, highest: int | None,
    pending_bytes: int = 0,
) -> None:
    """Send the receipt for `fut` (or a duplicate receipt if None) after all earlier receipts;
    `pending_bytes` are given back to the connection's flow control once `fut` is done
    (in the same callback: one loop callback per SEND)."""
    if fut is None:
        # duplicate: answer with (-1, -1) as Pulsar does, after anything still in flight
        in_order(cnx, p, lambda: cnx.send(commands.send_receipt(p.producer_id, seq, U64, U64, highest)))
        return

    def on_durable(f: asyncio.Future[Position]) -> None:
        cnx.flow.publish_done(pending_bytes)
        if f.cancelled() or f.exception() is not None:
            send_batch.refuse_unstored(cnx, p, [seq], f.exception() if not f.cancelled() else None)
            return
        pos = f.result()
        cnx.send(commands.send_receipt(p.producer_id, seq, pos.ledger_id, pos.entry_id, highest))

    fut.add_done_callback(on_durable)
    p.last_receipt = fut  # type: ignore[assignment]
