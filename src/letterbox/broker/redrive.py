# Redrive and purge of a dead letter topic (letterbox extensions).
# Redrive moves live dead letters that match a filter back to their
# REAL_TOPIC (or a given target): each chunk of messages is appended to the
# target(s) AND marked handled on the DLQ (dead_letters.HANDLED_SUBSCRIPTION)
# in ONE storage transaction, so a redrive interrupted at any point (even
# kill -9) and run again never moves a message twice and never loses one.
# A redriven message is a new entry: payload, key, ordering key, event time,
# schema version and the user's properties are kept, as are REAL_TOPIC and
# ORIGIN_MESSAGE_ID; the dead-letter and retry stamps (failure.stamps'
# REDRIVE_REMOVES: DEAD_LETTER_*, DELIVERY_COUNT, FIRST/LAST_DELIVERY_TIME,
# RECONSUMETIMES, DELAY_TIME, RETRY_TOPIC) are dropped, so its delivery count
# and its retries start at 0.
# Purge marks matching messages handled without moving them.
# Refused before anything is created: a topic holding messages that are not
# dead letters (NotDeadLetterTopic), a target in a namespace that does not
# exist (TopicNotFound), a second redrive while one runs (RedriveRunning).
# Each chunk's selection and commit hold the DLQ's lock, so a redrive and a
# purge never pick the same messages; a rate-limited redrive releases the
# lock while it waits, so a purge or a listing never waits for its pauses.
# A running redrive can be cancelled (cancel_redrive): it stops before its
# next chunk, keeping what it has committed.
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from letterbox.broker.dead_letters import (
    DeadLetter,
    DeadLetterFilter,
    handled_subscription,
    is_dead_letter_topic,
    live_dead_letters,
)
from letterbox.errors import LetterboxError, NotAllowed, ServerError, TopicNotFound
from letterbox.failure import redriven_properties
from letterbox.message_properties import REAL_TOPIC
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.storage.errors import StorageError
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.topic import PersistentTopic
    from letterbox.clock import Clock
    from letterbox.storage.transaction import Transaction

CHUNK = 100
MIN_RATE, MAX_RATE = 1.0, 100_000.0  # messages per second
_locks: dict[str, asyncio.Lock] = {}
_running: dict[str, asyncio.Event] = {}  # DLQ name -> set to cancel its redrive


class NotDeadLetterTopic(NotAllowed):
    """Redrive or purge of a topic whose messages are not dead letters."""


class RedriveRunning(LetterboxError):
    code = ServerError.NotAllowedError


@dataclass(frozen=True)
class RedriveRequest:
    filter: DeadLetterFilter
    target: TopicName | None = None
    max_messages: int | None = None
    rate_per_second: float | None = None
    dry_run: bool = False
    # the caller's right to write a target, asked per message as it moves (a message that
    # arrives during the redrive with another REAL_TOPIC is checked too); None: no check
    may_write: Callable[[TopicName], bool] | None = None


@dataclass(frozen=True)
class RedriveResult:
    matched: int
    moved: int
    remaining: int
    dry_run: bool
    cancelled: bool = False


def cancel_redrive(topic: PersistentTopic) -> bool:
    """Ask the redrive running on `topic` to stop; False when none runs."""
    stop = _running.get(str(topic.name))
    if stop is None:
        return False
    stop.set()
    return True


def check_dead_letter_topic(topic: PersistentTopic) -> None:
    """Raise NotDeadLetterTopic for a topic that holds messages and is not a
    dead letter topic (an empty topic has nothing to move and passes)."""
    if is_dead_letter_topic(topic) or next(live_dead_letters(topic), None) is None:
        return
    raise NotDeadLetterTopic(
        f"{topic.name} is not a dead letter topic (its name does not end in -DLQ and its "
        "messages carry no DEAD_LETTER_REASON); redrive and purge only work on dead letter topics"
    )


def _check_targets(topic: PersistentTopic, req: RedriveRequest) -> None:
    """Every target is another persistent topic in a namespace that exists."""
    service = topic.service
    names = {req.target} if req.target is not None else {
        _target_of(dl, req) for dl in _matching(topic, req.filter, req)}
    for name in sorted(str(n) for n in names if n is not None):
        target = TopicName.parse(name)
        if target == topic.name:
            raise NotAllowed(f"cannot redrive {topic.name} into itself")
        if not target.persistent:
            raise NotAllowed(f"redrive target {target} must be a persistent topic")
        ns = target.namespace_name
        if service.namespace_policies.document(ns) is None and not service.list_topics(ns):
            raise TopicNotFound(f"redrive target {target}: namespace {ns} does not exist")


def _lock(topic: PersistentTopic) -> asyncio.Lock:
    return _locks.setdefault(str(topic.name), asyncio.Lock())


def _target_of(dl: DeadLetter, req: RedriveRequest) -> TopicName | None:
    """Where `dl` goes: the request's target or its REAL_TOPIC; None when it has none
    or the caller may not write there (it then stays in the DLQ)."""
    if req.target is not None:
        target: TopicName | None = req.target
    else:
        real = dl.properties.get(REAL_TOPIC)
        target = TopicName.parse(real) if real else None
    if target is not None and req.may_write is not None and not req.may_write(target):
        return None
    return target


def _matching(topic: PersistentTopic, flt: DeadLetterFilter, redrive: RedriveRequest | None,
              start: int = 0) -> Iterator[DeadLetter]:
    """Live dead letters matching `flt`; for a redrive, only those with a target and a
    payload that could be opened (an unreadable one stays in the DLQ, listed with its error)."""
    for dl in live_dead_letters(topic, start):
        if flt.matches(dl) and (redrive is None or (dl.error is None and _target_of(dl, redrive) is not None)):
            yield dl


def _count_redrivable(topic: PersistentTopic, req: RedriveRequest) -> int:
    return sum(1 for _ in _matching(topic, req.filter, req))


def redriven_entry(dl: DeadLetter, producer_name: str, sequence_id: int, now: int) -> bytes:
    meta = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time=now)
    for k, v in redriven_properties(dl.properties).items():
        meta.properties.add(key=k, value=v)
    if dl.key is not None:
        meta.partition_key = dl.key
        if dl.key_b64:
            meta.partition_key_b64_encoded = True
    if dl.ordering_key is not None:
        meta.ordering_key = dl.ordering_key
    if dl.event_time:
        meta.event_time = dl.event_time
    if dl.null_value:
        meta.null_value = True
    if dl.schema_version is not None:
        meta.schema_version = dl.schema_version
    return build_headers_and_payload(meta, dl.payload)


def _mark_handled(txn: Transaction, cursor: ManagedCursor, chunk: list[DeadLetter]) -> None:
    plain = [dl.entry_id for dl in chunk if dl.batch_index < 0]
    if plain:
        txn.ack(cursor, plain)
    masks: dict[int, tuple[int, int]] = {}
    for dl in chunk:
        if dl.batch_index >= 0:
            size, mask = masks.get(dl.entry_id, (dl.batch_size, 0))
            masks[dl.entry_id] = (size, mask | 1 << dl.batch_index)
    for eid, (size, mask) in masks.items():
        txn.ack_batch_mask(cursor, eid, size, mask)


def _handled_cursor(topic: PersistentTopic) -> ManagedCursor:
    sub = handled_subscription(topic, create=True)
    assert sub is not None
    if not isinstance(sub.cursor, ManagedCursor):
        raise NotAllowed(f"subscription {sub.name} of {topic.name} is not durable")
    return sub.cursor


async def redrive(topic: PersistentTopic, req: RedriveRequest) -> RedriveResult:
    key = str(topic.name)
    if key in _running:
        raise RedriveRunning(f"a redrive of {topic.name} is already running; cancel it first")
    stop = _running[key] = asyncio.Event()
    try:
        async with _lock(topic):
            check_dead_letter_topic(topic)
            if req.dry_run:
                matched = _count_redrivable(topic, req)
                return RedriveResult(matched, 0, matched, True)
            if next(_matching(topic, req.filter, req), None) is None:
                return RedriveResult(0, 0, 0, False)  # nothing to move: create nothing either
            _check_targets(topic, req)
        moved = await _move_chunks(topic, req, stop)
        async with _lock(topic):
            remaining = _count_redrivable(topic, req)
        return RedriveResult(moved + remaining, moved, remaining, False, stop.is_set())
    finally:
        del _running[key]


async def _move_chunks(topic: PersistentTopic, req: RedriveRequest, stop: asyncio.Event) -> int:
    """Move matching messages chunk by chunk until done, the budget is spent or
    `stop` is set; the lock is held per chunk, never across a rate pause."""
    budget = req.max_messages
    rate = min(max(req.rate_per_second, MIN_RATE), MAX_RATE) if req.rate_per_second else None
    chunk_size = CHUNK if not rate else max(1, min(CHUNK, int(rate)))
    clock = topic.service.clock  # rate pauses follow the broker's clock (a test's manual one too)
    moved, started, resume = 0, clock.now_ms(), 0
    while (budget is None or moved < budget) and not stop.is_set():
        size = chunk_size if budget is None else min(chunk_size, budget - moved)
        async with _lock(topic):
            count, resume = await _move_one_chunk(topic, req, size, resume)
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


async def _move_one_chunk(topic: PersistentTopic, req: RedriveRequest, size: int,
                          resume: int) -> tuple[int, int]:
    """Append up to `size` matching messages from entry `resume` on to their
    targets and mark them handled, in one transaction: (count, next resume).
    Nothing changes in memory unless it committed; a failed chunk stays in the DLQ
    (counted, logged once) and the storage error is raised."""
    service = topic.service
    cursor = _handled_cursor(topic)
    async with service.store.transaction() as txn:
        await txn.lock(cursor)
        chunk: list[DeadLetter] = []
        names: list[TopicName] = []  # each message's target, decided once
        for dl in _matching(topic, req.filter, req, resume):
            name = _target_of(dl, req)
            assert name is not None  # _matching keeps only messages with a target
            chunk.append(dl)
            names.append(name)
            if len(chunk) >= size:
                break
        if not chunk:
            return 0, resume
        targets: dict[str, PersistentTopic] = {}
        for name in names:
            if str(name) not in targets:
                if name == topic.name:
                    raise NotAllowed(f"cannot redrive {topic.name} into itself")
                targets[str(name)] = service.persistent_topic(name, create=True)
        producer_name = f"{topic.name}-letterbox-redrive"
        now = service.clock.now_ms()
        for dl, name in zip(chunk, names, strict=True):
            target = targets[str(name)]
            data = redriven_entry(dl, producer_name, txn.next_entry_id(target.ledger), now)
            txn.append(target.ledger, data, 1, now)
        _mark_handled(txn, cursor, chunk)
        try:
            await txn.commit()
        except StorageError as exc:
            service.storage_failed("redrive", exc, f"{len(chunk)} dead letters of {topic.name}")
            raise
    return len(chunk), chunk[-1].entry_id


async def purge(topic: PersistentTopic, flt: DeadLetterFilter, dry_run: bool) -> int:
    """Mark matching dead letters handled, in one transaction (nothing changes in memory
    unless it committed)."""
    async with _lock(topic):
        check_dead_letter_topic(topic)
        if dry_run:
            return sum(1 for _ in _matching(topic, flt, None))
        if next(_matching(topic, flt, None), None) is None:
            return 0  # nothing to purge: create nothing either
        cursor = _handled_cursor(topic)
        async with topic.service.store.transaction() as txn:
            await txn.lock(cursor)
            chunk = list(_matching(topic, flt, None))
            if not chunk:
                return 0
            _mark_handled(txn, cursor, chunk)
            try:
                await txn.commit()
            except StorageError as exc:
                topic.service.storage_failed("purge", exc, f"{len(chunk)} dead letters of {topic.name}")
                raise
        return len(chunk)
