# Redrive of a dead letter topic (letterbox extension): live dead letters that
# match a filter move back to their REAL_TOPIC (or a given target): each chunk of
# messages is appended to the target(s) AND marked handled on the DLQ
# (failure.HANDLED_SUBSCRIPTION) in ONE storage transaction, so a redrive
# interrupted at any point (even kill -9) and run again never moves a message
# twice and never loses one.
# A redriven message is a new entry: payload, key, ordering key, event time,
# schema version and the user's properties are kept, as are REAL_TOPIC and
# ORIGIN_MESSAGE_ID; the dead-letter and retry stamps (failure.stamps'
# REDRIVE_REMOVES: DEAD_LETTER_*, DELIVERY_COUNT, FIRST/LAST_DELIVERY_TIME,
# RECONSUMETIMES, DELAY_TIME, RETRY_TOPIC) are dropped, so its delivery count
# and its retries start at 0 (redrive_entries.py).
# Refused before anything is created (check): a topic holding messages that are
# not dead letters (NotDeadLetterTopic), a target in a namespace that does not
# exist (TopicNotFound), a terminated target or a partitioned topic's parent
# name (NotAllowed; a chunk re-checks termination just before it commits), a
# second redrive while one runs (RedriveRunning).
# What a redrive takes and how many: redrive_scan.py (scans that give the event
# loop back as they go). Locks and the running redrive: redrive_locks.py. Each
# chunk's selection and commit hold the DLQ's lock, so a redrive and a purge
# (dead_letter_purge.py) never pick the same messages; a rate-limited redrive
# releases the lock while it waits, so a purge or a listing never waits for its
# pauses. A running redrive can be cancelled (cancel_redrive): it stops before
# its next chunk, keeping what it has committed.
# Subscription-only (RedriveRequest.subscription_only, redrive_targets.py): each
# message goes back to the topic AND subscription it died in; the same chunk
# transaction acknowledges the new entry on every other durable cursor of that
# topic, so only that subscription receives it again.
# Edit-and-replay (RedriveRequest.edit, failure/edits.py): each message is changed as it is
# appended, in the same chunk transaction; an edit that does not apply to a matching message
# refuses the whole redrive up front (check), before anything moved.
# A redrive task (redrive_tasks.py) passes a ChunkProgress: its record is
# written in each chunk's transaction, so its counts are exact after a crash.
from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.moves.dead_letter_purge import purge
from letterbox.broker.moves.dead_letters import DeadLetter
from letterbox.broker.moves.failure_events import publish_failure_event
from letterbox.broker.moves.move_transaction import MoveTransaction
from letterbox.broker.moves.redrive_entries import handled_cursor, mark_handled, redriven_entry
from letterbox.broker.moves.redrive_locks import (
    RedriveRunning,
    _locks,
    cancel_redrive,
    claim,
    dlq_lock,
    redrive_running,
    release,
)
from letterbox.broker.moves.redrive_scan import (
    NotDeadLetterTopic,
    RedriveRequest,
    Survey,
    check_dead_letter_topic,
    check_targets,
    count_matching,
    movable,
    survey,
)
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
    from letterbox.clock import Clock
    from letterbox.storage.transaction import Transaction

__all__ = [
    "CHUNK", "MAX_RATE", "MIN_RATE", "ChunkProgress", "NotDeadLetterTopic", "RedriveRequest", "RedriveResult",
    "RedriveRunning", "Survey", "_lock", "_locks", "cancel_redrive", "check", "check_dead_letter_topic", "claim",
    "count_matching", "purge", "redrive", "redrive_running", "release", "remaining", "run",
]

CHUNK = 100
MIN_RATE, MAX_RATE = 1.0, 100_000.0  # messages per second
_lock = dlq_lock  # the name tests/unit/test_redrive_locks.py knows


class ChunkProgress(Protocol):
    """A redrive task's record keeping: `record` adds its writes to a chunk's transaction,
    `committed` follows once that transaction committed."""

    def record(self, txn: Transaction, count: int, resume: int) -> None: ...

    def committed(self, count: int, resume: int) -> None: ...


@dataclass(frozen=True)
class RedriveResult:
    matched: int
    moved: int
    remaining: int
    dry_run: bool
    cancelled: bool = False


async def check(topic: MovedTopic, req: RedriveRequest) -> Survey:
    """Refuse a redrive that cannot run (see the header), before anything is created;
    what it matches and would move now (one scan of the DLQ)."""
    async with dlq_lock(topic):
        check_dead_letter_topic(topic)
        found = await survey(topic, req)
        if found.edit_refused is not None:
            raise NotAllowed(f"{found.edit_refused}; nothing was redriven")
        if not req.dry_run and (req.subscription_only or found.redrivable):
            check_targets(topic, req, found)
        return found


async def remaining(topic: MovedTopic, req: RedriveRequest) -> Survey:
    """What `req` would still move (and match) now."""
    async with dlq_lock(topic):
        return await survey(topic, req)


async def redrive(topic: MovedTopic, req: RedriveRequest) -> RedriveResult:
    stop = claim(topic)
    try:
        matched = (await check(topic, req)).redrivable
        if req.dry_run:
            return RedriveResult(matched, 0, matched, True)
        if not matched:
            return RedriveResult(0, 0, 0, False)  # nothing to move: create nothing either
        moved, left = await run(topic, req, stop)
        return RedriveResult(moved + left, moved, left, False, stop.is_set())
    finally:
        release(topic)


async def run(topic: MovedTopic, req: RedriveRequest, stop: asyncio.Event,
              progress: ChunkProgress | None = None, resume: int = 0) -> tuple[int, int]:
    """Move chunk by chunk (the caller holds claim()); (moved, redrivable remaining)."""
    moved = await _move_chunks(topic, req, stop, progress, resume)
    return moved, (await remaining(topic, req)).redrivable


async def _move_chunks(topic: MovedTopic, req: RedriveRequest, stop: asyncio.Event,
                       progress: ChunkProgress | None, resume: int) -> int:
    """Move matching messages chunk by chunk until done, the budget is spent or
    `stop` is set; the lock is held per chunk, never across a rate pause."""
    budget = req.max_messages
    rate = min(max(req.rate_per_second, MIN_RATE), MAX_RATE) if req.rate_per_second else None
    chunk_size = CHUNK if not rate else max(1, min(CHUNK, int(rate)))
    clock = topic.service.clock  # rate pauses follow the broker's clock (a test's manual one too)
    moved, started = 0, clock.now_ms()
    while (budget is None or moved < budget) and not stop.is_set():
        size = chunk_size if budget is None else min(chunk_size, budget - moved)
        async with dlq_lock(topic):
            count, resume = await _move_one_chunk(topic, req, size, resume, progress)
        if not count:
            break
        moved += count
        if rate:
            ahead = moved / rate - (clock.now_ms() - started) / 1000
            if ahead > 0:
                await _pause(clock, stop, ahead)
    return moved


async def _pause(clock: Clock, stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds` of the broker's clock, or until `stop` is set."""
    stopped = asyncio.ensure_future(stop.wait())
    pause = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((stopped, pause), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        pause.cancel()


async def _select(topic: MovedTopic, req: RedriveRequest, size: int, resume: int
                  ) -> list[tuple[DeadLetter, TopicName, SubscriptionTarget | None]]:
    """Up to `size` movable messages from entry `resume` on, each with its target decided once."""
    out: list[tuple[DeadLetter, TopicName, SubscriptionTarget | None]] = []
    async with contextlib.aclosing(movable(topic, req, resume)) as found:
        async for item in found:
            out.append(item)
            if len(out) >= size:
                break
    return out


async def _move_one_chunk(topic: MovedTopic, req: RedriveRequest, size: int,
                          resume: int, progress: ChunkProgress | None) -> tuple[int, int]:
    """Append up to `size` matching messages from entry `resume` on to their
    targets and mark them handled, in one transaction: (count, next resume).
    Subscription-only: the same transaction acks each new entry on the other durable
    cursors of its topic. Nothing changes in memory unless it committed; a failed chunk
    stays in the DLQ (counted, logged once) and the storage error is raised."""
    service = topic.service
    cursor = handled_cursor(topic)
    async with MoveTransaction(service, "redrive") as move:
        await move.lock(cursor)
        chunk = await _select(topic, req, size, resume)
        if not chunk:
            return 0, resume
        targets: dict[str, MovedTopic] = {}
        others: dict[tuple[str, str], list[ManagedCursor]] = {}
        for _dl, name, sub in chunk:
            if str(name) not in targets:
                if name == topic.name:
                    raise NotAllowed(f"cannot redrive {topic.name} into itself")
                targets[str(name)] = (target_topic(service, sub) if sub is not None
                                      else service.persistent_topic(name, create=True))
            if sub is not None and (str(name), sub.subscription) not in others:
                others[(str(name), sub.subscription)] = other_cursors(targets[str(name)], sub.subscription)
        locking = {id(c): c for cs in others.values() for c in cs}
        for other in sorted(locking.values(), key=lambda c: (c.ledger.name, c.name)):
            await move.lock(other)  # one fixed order: two redrives never wait on each other
        producer_name = f"{topic.name}-letterbox-redrive"
        now = service.clock.now_ms()
        schemas = service.schemas.carry_from(topic.name)  # small hook (parity): schemas on the targets
        events: list[dict[str, Any]] = []
        for dl, name, sub in chunk:
            target = targets[str(name)]
            new_id = move.next_entry_id(target.ledger)
            data = redriven_entry(dl, producer_name, new_id, now, schemas.to(target.name), req.edit, req.editor)
            appended = move.append(target.ledger, data, 1, now)
            events.append(_redrive_event(topic, dl, target, new_id, sub, now, req))
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
        await move.commit(f"{len(chunk)} dead letters of {topic.name}")  # redriven: counted as published
    if progress is not None:
        progress.committed(len(chunk), last)
    for event in events:  # after the commit, in the order the messages moved
        publish_failure_event(service, event)
    return len(chunk), last


def _redrive_event(dlq: MovedTopic, dl: DeadLetter, target: MovedTopic, new_entry: int,
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
