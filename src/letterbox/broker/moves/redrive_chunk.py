# One chunk of a redrive (redrive.py runs them one after another): up to `size` movable dead
# letters (redrive_scan.movable) from an entry on, appended to their targets and marked handled
# on the DLQ in ONE MoveTransaction, so each message is in exactly one of the DLQ or its target
# after any crash.
# Pipelining: while a chunk's commit waits for the writer (its fsync), the NEXT chunk's
# messages are read and opened (`ahead`); the commit's cursor changes are applied in one loop
# callback, so that read sees the handled marks either all before or all after it. A chunk
# selected ahead is used only if, with the handled cursor locked, every one of its messages is
# still live (`still_live`: a batch split between two chunks, or a purge in between, sends it
# back to a fresh selection); messages that arrived in the DLQ meanwhile come after it, in
# order. The new entries (their ids, sequence ids, events) are built only once the cursor is
# locked, with no await before the commit assigns the ids, so the ids they name are exact.
# Chunks are bounded by count (CHUNK, RATE_CHUNK for a rate-limited redrive) and by payload
# bytes (CHUNK_BYTES): one commit (one fsync) moves many messages, and the loop turn that
# builds a chunk stays short.
# Failure events (redrive, edit) are built only for a source whose namespace opted in
# (failure_events_wanted, asked once per source per chunk) and published after the commit,
# in the order the messages moved.
from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.moves.dead_letters import DeadLetter
from letterbox.broker.moves.failure_events import failure_events_wanted, publish_failure_event
from letterbox.broker.moves.move_transaction import MoveTransaction
from letterbox.broker.moves.redrive_entries import handled_cursor, mark_handled, redriven_entry
from letterbox.broker.moves.redrive_scan import RedriveRequest, movable
from letterbox.broker.moves.redrive_targets import SubscriptionTarget, other_cursors, target_topic
from letterbox.errors import NotAllowed
from letterbox.failure.events import EDIT, REDRIVE, failure_event
from letterbox.message_properties import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_SUBSCRIPTION,
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    origin_message_id,
)
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic
    from letterbox.storage.transaction import Transaction

CHUNK = 1000  # messages per chunk at most
RATE_CHUNK = 100  # ... of a rate-limited redrive (it pauses between chunks)
CHUNK_BYTES = 1024 * 1024  # payload bytes per chunk, about (a larger message is a chunk alone)

Selected = list[tuple[DeadLetter, TopicName, SubscriptionTarget | None]]


class ChunkProgress(Protocol):
    """A redrive task's record keeping: `record` adds its writes to a chunk's transaction,
    `committed` follows once that transaction committed."""

    def record(self, txn: Transaction, count: int, resume: int) -> None: ...

    def committed(self, count: int, resume: int) -> None: ...


async def select(topic: MovedTopic, req: RedriveRequest, size: int, resume: int,
                 taken: frozenset[tuple[int, int]] = frozenset()) -> Selected:
    """Up to `size` movable messages (and about CHUNK_BYTES) from entry `resume` on, each with
    its target decided once; `taken`: (entry, batch index) of messages the chunk committing
    now moves (selected ahead, they are not handled yet)."""
    out: Selected = []
    nbytes = 0
    async with contextlib.aclosing(movable(topic, req, resume)) as found:
        async for item in found:
            if taken and (item[0].entry_id, item[0].batch_index) in taken:
                continue
            out.append(item)
            nbytes += len(item[0].payload)
            if len(out) >= size or nbytes >= CHUNK_BYTES:
                break
    return out


def still_live(topic: MovedTopic, cursor: ManagedCursor, chunk: Selected) -> bool:
    """Whether every message of a chunk selected ahead is still in the DLQ and not handled."""
    first = topic.ledger.first_position.entry_id
    for dl, _n, _s in chunk:
        eid = dl.entry_id
        if eid < first or cursor.is_acked(eid):
            return False
        if dl.batch_index >= 0 and dl.batch_index in cursor.acked_indexes(eid):
            return False
    return True


async def move_chunk(topic: MovedTopic, req: RedriveRequest, size: int, resume: int,
                     progress: ChunkProgress | None, ahead: Selected | None = None,
                     next_size: int = 0) -> tuple[int, int, Selected | None]:
    """Append up to `size` matching messages from entry `resume` on to their targets and mark
    them handled, in one transaction: (count, next resume, the next chunk selected ahead or
    None). `ahead`: this chunk as selected during the previous commit (used if still live);
    `next_size` > 0: select the next chunk while this one commits.
    Subscription-only: the same transaction acks each new entry on the other durable cursors
    of its topic. Nothing changes in memory unless it committed; a failed chunk stays in the
    DLQ (counted, logged once) and the storage error is raised."""
    service = topic.service
    cursor = handled_cursor(topic)
    async with MoveTransaction(service, "redrive") as move:
        await move.lock(cursor)
        if ahead is not None and ahead and still_live(topic, cursor, ahead[:size]):
            chunk = ahead[:size]
        else:
            chunk = await select(topic, req, size, resume)
        if not chunk:
            return 0, resume, None
        targets, others = _targets(topic, chunk)
        locking = {id(c): c for cs in others.values() for c in cs}
        for other in sorted(locking.values(), key=lambda c: (c.ledger.name, c.name)):
            await move.lock(other)  # one fixed order: two redrives never wait on each other
        # from here to the commit no await: the entry ids built into the entries are exact
        producer_name = f"{topic.name}-letterbox-redrive"
        now = service.clock.now_ms()
        schemas = service.schemas.carry_from(topic.name)  # small hook (parity): schemas on the targets
        wanted: dict[str, bool] = {}  # source topic -> whether its namespace takes failure events
        events: list[dict[str, Any]] = []
        for dl, name, sub in chunk:
            target = targets[str(name)]
            new_id = move.next_entry_id(target.ledger)
            data = redriven_entry(dl, producer_name, new_id, now, schemas.to(target.name), req.edit, req.editor)
            appended = move.append(target.ledger, data, 1, now, None)  # redriven_entry sets no delivery time
            source = dl.properties.get(REAL_TOPIC) or str(target.name)
            if source not in wanted:
                wanted[source] = failure_events_wanted(service, source)
            if wanted[source]:
                events.append(redrive_event(topic, dl, target, new_id, sub, now, req))
            if sub is not None:
                for other in others[(str(name), sub.subscription)]:
                    move.ack_appended(other, appended)
        mark_handled(move, cursor, [dl for dl, _n, _s in chunk])
        last = chunk[-1][0].entry_id
        for target in targets.values():  # terminated while this chunk waited: it takes nothing more
            if target.terminated is not None:
                raise NotAllowed(f"redrive target {target.name} is terminated: it takes no more messages")
        if progress is not None:
            progress.record(move.txn, len(chunk), last)
        # redriven: counted as published; handed to the writer now, awaited below
        committing = move.start_commit(f"{len(chunk)} dead letters of {topic.name}")
        taken = frozenset((dl.entry_id, dl.batch_index) for dl, _n, _s in chunk if dl.entry_id == last)
        nxt = await _commit_and_select(committing, topic, req, next_size, last, taken)
    if progress is not None:
        progress.committed(len(chunk), last)
    for event in events:  # after the commit, in the order the messages moved
        publish_failure_event(service, event)
    return len(chunk), last, nxt


def _targets(topic: MovedTopic, chunk: Selected
             ) -> tuple[dict[str, MovedTopic], dict[tuple[str, str], list[ManagedCursor]]]:
    """The chunk's target topics (created on first use) by name and, subscription-only, the
    other durable cursors of each (target, subscription), which ack its new entries."""
    service = topic.service
    targets: dict[str, MovedTopic] = {}
    others: dict[tuple[str, str], list[ManagedCursor]] = {}
    for _dl, name, sub in chunk:
        key = str(name)
        if key not in targets:
            if name == topic.name:
                raise NotAllowed(f"cannot redrive {topic.name} into itself")
            targets[key] = (target_topic(service, sub) if sub is not None
                            else service.persistent_topic(name, create=True))
        if sub is not None and (key, sub.subscription) not in others:
            others[(key, sub.subscription)] = other_cursors(targets[key], sub.subscription)
    return targets, others


async def _commit_and_select(committing: Coroutine[Any, Any, None], topic: MovedTopic, req: RedriveRequest,
                             next_size: int, last: int, taken: frozenset[tuple[int, int]]) -> Selected | None:
    """Await the commit; meanwhile (next_size > 0) select the next chunk from entry `last` on
    (without `taken`, this chunk's messages of that entry). A selection that fails is dropped
    (the next chunk selects again, under the lock, and raises its error there); the commit's
    error is raised."""
    commit = asyncio.ensure_future(committing)
    nxt: Selected | None = None
    try:
        if next_size > 0:
            with contextlib.suppress(Exception):
                nxt = await select(topic, req, next_size, last, taken)
    finally:
        await commit
    return nxt


def redrive_event(dlq: MovedTopic, dl: DeadLetter, target: MovedTopic, new_entry: int,
                  sub: SubscriptionTarget | None, now: int, req: RedriveRequest) -> dict[str, Any]:
    """The failure event of one redriven message (an edit when the redrive changed it); its
    topic and subscription are where it failed (REAL_TOPIC, DEAD_LETTER_SUBSCRIPTION)."""
    props = dl.properties
    source = props.get(REAL_TOPIC) or str(target.name)
    new_id = origin_message_id(target.ledger.ledger_id, new_entry, target.name.partition_index, -1)
    return failure_event(
        EDIT if req.edit is not None else REDRIVE, time_ms=now, topic=source,
        subscription=sub.subscription if sub is not None else props.get(DEAD_LETTER_SUBSCRIPTION),
        message_id=props.get(ORIGIN_MESSAGE_ID), reason=props.get(DEAD_LETTER_REASON),
        deadLetterTopic=str(dlq.name), deadLetterMessageId=dl.message_id, target=str(target.name),
        newMessageId=new_id, by=req.editor if req.edit is not None else None,
        oldPayloadSha256=hashlib.sha256(dl.payload).hexdigest() if req.edit is not None else None,
        changes=req.edit.changes() if req.edit is not None else None,
    )
