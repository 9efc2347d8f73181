# What a consumer asks about where it is, answered from its subscription without changing
# anything: GET_LAST_MESSAGE_ID (the last message id, and the cursor's mark-delete position)
# and CONSUMER_STATS.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from letterbox.broker.compaction.compacted_reads import last_compacted_id
from letterbox.broker.connection.handlers_consumer import U64, consumer_of
from letterbox.broker.topics.subscription import subscription_of
from letterbox.errors import NotAllowed
from letterbox.protocol import commands, parse_entry_metadata, pb
from letterbox.storage.position import Position

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.protocol import Frame

T = pb.BaseCommand


def handle_get_last_message_id(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.getLastMessageId
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    if sub is None:
        raise NotAllowed("GetLastMessageId is not supported on non-persistent topics")
    ledger = sub.topic.ledger
    last = ledger.last_confirmed
    batch_index = -1
    compacted = last_compacted_id(sub) if sub.read_compacted else None
    if compacted is not None:
        last, batch_index = Position(last.ledger_id, compacted[0]), compacted[1]
    elif last.entry_id >= 0:
        entry = ledger.read_entry(last.entry_id)
        if entry is not None:
            meta = parse_entry_metadata(entry.data)
            if meta.HasField("num_messages_in_batch"):
                batch_index = meta.num_messages_in_batch - 1
    # every cursor has a mark-delete position, a reader's too (as Pulsar answers): the
    # client compares it with the last id for has_message_available() after a seek or
    # when it started at latest
    md = sub.cursor.mark_delete
    cnx.send(
        commands.get_last_message_id_response(
            c.request_id,
            last.ledger_id,
            last.entry_id & U64,
            consumer.partition_index,
            batch_index,
            mark_delete=(md.ledger_id, md.entry_id & U64) if md is not None else None,
        )
    )


def handle_consumer_stats(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.consumerStats
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    cnx.send(commands.consumer_stats_response(
        c.request_id, consumer_name=consumer.name, available_permits=consumer.permits,
        unacked_messages=sum(consumer.pending.values()), msg_backlog=sub.backlog() if sub is not None else 0,
        sub_type=str(consumer.sub_type)))


HANDLERS: dict[int, Any] = {
    T.GET_LAST_MESSAGE_ID: handle_get_last_message_id,
    T.CONSUMER_STATS: handle_consumer_stats,
}
