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
# One chunk (its size in messages and bytes, the reading of the next chunk while it
# commits, its failure events): redrive_chunk.py.
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letter_purge import purge
from letterbox.broker.moves.redrive_chunk import (
    CHUNK,
    RATE_CHUNK,
    ChunkProgress,
    Selected,
    move_chunk,
)
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
    survey,
)
from letterbox.errors import NotAllowed

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic
    from letterbox.clock import Clock

__all__ = [
    "CHUNK", "MAX_RATE", "MIN_RATE", "ChunkProgress", "NotDeadLetterTopic", "RedriveRequest", "RedriveResult",
    "RedriveRunning", "Survey", "_lock", "_locks", "cancel_redrive", "check", "check_dead_letter_topic", "claim",
    "count_matching", "purge", "redrive", "redrive_running", "release", "remaining", "run",
]

MIN_RATE, MAX_RATE = 1.0, 100_000.0  # messages per second
_lock = dlq_lock  # the name tests/unit/test_redrive_locks.py knows


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
    `stop` is set; the lock is held per chunk, never across a rate pause. Unpaced, each
    chunk reads the next one while it commits (redrive_chunk.py)."""
    budget = req.max_messages
    rate = min(max(req.rate_per_second, MIN_RATE), MAX_RATE) if req.rate_per_second else None
    chunk_size = CHUNK if not rate else max(1, min(RATE_CHUNK, int(rate)))
    clock = topic.service.clock  # rate pauses follow the broker's clock (a test's manual one too)
    moved, started = 0, clock.now_ms()
    ahead: Selected | None = None
    while (budget is None or moved < budget) and not stop.is_set():
        size = chunk_size if budget is None else min(chunk_size, budget - moved)
        after = chunk_size if budget is None else min(chunk_size, budget - moved - size)
        async with dlq_lock(topic):
            count, resume, ahead = await move_chunk(topic, req, size, resume, progress, ahead,
                                                    0 if rate else after)
        if not count:
            break
        moved += count
        if rate:
            early = moved / rate - (clock.now_ms() - started) / 1000
            if early > 0:
                await _pause(clock, stop, early)
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
