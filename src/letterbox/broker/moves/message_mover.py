# Moving one message of a subscription to another topic, atomically: the
# append to the target and the acknowledgement in the source subscription are
# one storage transaction. This is what `reconsume_later` (to a retry topic,
# with a delay) and `terminate` (to the dead letter topic) of the Python client
# additions stand on, through the admin API: a client that dies before the
# move leaves the message unacknowledged (it is redelivered), one that dies
# after it finds the move done, and a move asked twice for the same message
# moves nothing the second time (the message is already acknowledged). So the
# retry and dead letter topics never get a message twice for one delivery.
# Only the one message (batch index) is moved and acknowledged; its siblings
# in a batch stay where they are. The target may be the source topic itself
# (a retry of a message already on the retry topic): the message is appended
# anew, with its delay, and the old copy acknowledged. A terminated target takes
# nothing: NotAllowed naming it (the route's 412), the message stays put.
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letter_router import dead_letter_stamps
from letterbox.broker.moves.failure_events import publish_failure_event
from letterbox.broker.moves.move_transaction import MoveTransaction, refuse_terminated
from letterbox.errors import NotAllowed, TopicNotFound
from letterbox.failure import MAX_DELAY_MS
from letterbox.failure.events import DEAD_LETTER, TERMINATE, failure_event
from letterbox.message_properties import REASON_TERMINATED, origin_message_id
from letterbox.protocol import MalformedFrame
from letterbox.protocol.compression import CompressionError
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedSubscription
    from letterbox.storage.position import Position

log = logging.getLogger("letterbox.move")
_ROLE = "move target"  # how a refusal names the target (a terminated one takes nothing)


@dataclass(frozen=True)
class MoveRequest:
    entry_id: int
    batch_index: int  # -1 for a message outside a batch
    target: TopicName
    properties: Mapping[str, str]
    deliver_after_ms: int = 0
    dead_letter_reason: str | None = None
    description: str | None = None
    initial_subscription: str | None = None


@dataclass(frozen=True)
class MoveResult:
    moved: bool
    message_id: str | None = None  # the message's id in the target topic


async def move_message(sub: MovedSubscription, req: MoveRequest) -> MoveResult:
    """Append message `req.entry_id`/`req.batch_index` of `sub` to `req.target` and
    acknowledge it in `sub`, in one transaction. An acknowledged message is not moved.
    Nothing changes in memory unless the transaction committed; if it failed, the message
    stays unacknowledged in `sub` and the storage error is raised."""
    source = sub.topic
    service = source.service
    cursor = _check_request(sub, req)
    eid = req.entry_id
    target = service.persistent_topic(req.target, create=True)
    if req.initial_subscription and req.initial_subscription not in target.subscriptions:
        target.subscription_for(req.initial_subscription, True, "earliest", None)
    carry = service.schemas.carry_from(source.name).to(req.target)  # small hook (parity): schema on the target
    async with MoveTransaction(service, "move") as move:
        await move.lock(cursor)  # decide on a state no other move is changing
        if cursor.is_acked(eid) or req.batch_index in cursor.acked_indexes(eid):
            return MoveResult(moved=False)
        entry = source.ledger.read_entry(eid)
        if entry is None:
            raise TopicNotFound(f"message {eid} of {source.name} is no longer stored")
        size = entry.num_messages
        batched = size > 1 or req.batch_index >= 0
        if batched and not 0 <= req.batch_index < size:
            raise NotAllowed(f"batch index {req.batch_index} is outside the batch of {size} message(s)")
        now = service.clock.now_ms()
        extra = dict(req.properties)
        if req.dead_letter_reason:
            stamps = dead_letter_stamps(sub, eid, req.dead_letter_reason, req.description, now,
                                        last_delivery_counted=False)
            extra = {**stamps, **extra}
        skip = frozenset(i for i in range(size) if i != req.batch_index) if batched else frozenset()
        dlq_entry_id = move.next_entry_id(target.ledger)
        try:
            prepared = move.append_moved(
                entry, source.name, target.ledger, extra=extra, skip_indexes=skip,
                producer_name=f"{source.name}-{sub.name}-letterbox-move", now=now,
                deliver_at=now + req.deliver_after_ms if req.deliver_after_ms else None,
                limit=service.config.max_message_size, schema=carry,
            )
        except (CompressionError, MalformedFrame) as exc:  # a batch that cannot be reopened stays put
            raise NotAllowed(f"message {eid}:{req.batch_index} of {source.name} cannot be reopened "
                             f"to move one message of its batch: {exc}") from None
        if prepared is None:  # cannot happen: the one message asked for is kept
            raise NotAllowed(f"message {eid}:{req.batch_index} has nothing to move")
        append, count = prepared
        if batched:
            move.ack_batch_mask(cursor, eid, size, 1 << req.batch_index)
        else:
            move.ack(cursor, [eid])
        if req.dead_letter_reason:  # a terminate may poison its key (ordered quarantine)
            sub.quarantine.record_poison(move.txn, cursor, req.dead_letter_reason, req.target,
                                         [(entry, dlq_entry_id)])
        refuse_terminated(service, req.target, _ROLE)  # terminated while this move waited
        await move.commit(f"{source.name}/{sub.name} {eid}:{req.batch_index}")
    return _moved(sub, req, cursor, append.position, count)


def _moved(sub: MovedSubscription, req: MoveRequest, cursor: ManagedCursor, pos: Position,
           count: int) -> MoveResult:
    """After the commit: settle the source, count a dead letter, name the moved message."""
    source, eid = sub.topic, req.entry_id
    if cursor.is_acked(eid):
        sub.settle_acknowledged(eid)
    if req.dead_letter_reason:
        source.service.stats.dead_lettered(req.dead_letter_reason, count, str(source.name), sub.name)
    new_id = origin_message_id(pos.ledger_id, pos.entry_id, req.target.partition_index, -1)
    if req.dead_letter_reason:  # a terminate (or another dead-letter move) through the admin move
        kind = TERMINATE if req.dead_letter_reason == REASON_TERMINATED else DEAD_LETTER
        publish_failure_event(source.service, failure_event(
            kind, time_ms=source.service.clock.now_ms(), topic=str(source.name), subscription=sub.name,
            message_id=origin_message_id(source.ledger.ledger_id, eid, source.name.partition_index,
                                         req.batch_index),
            reason=req.dead_letter_reason, description=req.description, deadLetterTopic=str(req.target),
            deadLetterMessageId=new_id))
    log.debug("moved %s:%d of %s/%s to %s as %s", eid, req.batch_index, source.name, sub.name, req.target, new_id)
    return MoveResult(moved=True, message_id=new_id)


def _check_request(sub: MovedSubscription, req: MoveRequest) -> ManagedCursor:
    """Refuse a move before anything is read (a non-durable source, a non-persistent or
    terminated target, a delay out of range, a message that never existed); the source's
    cursor."""
    cursor = sub.cursor
    if not isinstance(cursor, ManagedCursor):
        raise NotAllowed("only durable subscriptions can move messages")
    if not req.target.persistent:
        raise NotAllowed(f"target topic {req.target} must be persistent")
    if not 0 <= req.deliver_after_ms <= MAX_DELAY_MS:
        raise NotAllowed(f"deliverAfterMs must be between 0 and {MAX_DELAY_MS}")
    if req.entry_id >= sub.topic.ledger.next_entry_id or req.entry_id < 0:
        raise TopicNotFound(f"message {req.entry_id} does not exist on {sub.topic.name}")
    refuse_terminated(sub.topic.service, req.target, _ROLE)  # the message stays unacknowledged
    return cursor
