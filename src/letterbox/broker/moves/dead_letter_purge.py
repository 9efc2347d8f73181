# Purge of a dead letter topic (letterbox extension): the live dead letters matching
# a filter are marked handled (failure.HANDLED_SUBSCRIPTION) without being moved,
# all in ONE storage transaction (nothing changes in memory unless it committed).
# It holds the DLQ's lock (redrive_locks.dlq_lock), so it never races a redrive's
# chunk. The scan gives the event loop back as it goes and keeps only each
# message's position (entry, batch index), never its payload: a purge of a large
# DLQ neither stalls the broker nor holds the DLQ in memory.
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letters import DeadLetterFilter
from letterbox.broker.moves.move_transaction import MoveTransaction
from letterbox.broker.moves.redrive_entries import Mark, handled_cursor, mark_handled
from letterbox.broker.moves.redrive_locks import dlq_lock
from letterbox.broker.moves.redrive_scan import check_dead_letter_topic, count_matching, matching

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic


async def purge(topic: MovedTopic, flt: DeadLetterFilter, dry_run: bool) -> int:
    """Mark matching dead letters handled, in one transaction; how many (would be) purged."""
    async with dlq_lock(topic):
        check_dead_letter_topic(topic)
        if dry_run:
            return await count_matching(topic, flt)
        marks: list[Mark] = []
        async with contextlib.aclosing(matching(topic, flt)) as letters:
            async for dl in letters:
                marks.append(Mark(dl.entry_id, dl.batch_index, dl.batch_size))
        if not marks:
            return 0  # nothing to purge: create nothing either
        cursor = handled_cursor(topic)
        async with MoveTransaction(topic.service, "purge") as move:  # a move with nothing to append
            await move.lock(cursor)  # the DLQ's lock is held: nobody marked anything meanwhile
            mark_handled(move, cursor, marks)
            await move.commit(f"{len(marks)} dead letters of {topic.name}")
        return len(marks)
