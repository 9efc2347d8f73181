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
# Subscription-only (RedriveRequest.subscription_only, redrive_targets.py): each
# message goes back to the topic AND subscription it died in; the same chunk
# transaction acknowledges the new entry on every other durable cursor of that
# topic, so only that subscription receives it again.
# A redrive task (redrive_tasks.py) passes a ChunkProgress: its record is
# written in each chunk's transaction, so its counts are exact after a crash.
# The per-DLQ locks live only while someone holds or waits for them.
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from letterbox.broker.dead_letters import (
    DeadLetter,
    DeadLetterFilter,
    handled_subscription,
    is_dead_letter_topic,
    live_dead_letters,
)
from letterbox.broker.redrive_entries import mark_handled, redriven_entry
from letterbox.broker.redrive_targets import (
    SubscriptionTarget,
    check_subscription_only,
    other_cursors,
    subscription_target,
    target_topic,
)
from letterbox.errors import LetterboxError, NotAllowed, ServerError, TopicNotFound
from letterbox.message_properties import REAL_TOPIC
from letterbox.storage.errors import StorageError
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.service import BrokerService
    from letterbox.broker.topic import PersistentTopic
    from letterbox.clock import Clock
    from letterbox.storage.transaction import Transaction

CHUNK = 100
MIN_RATE, MAX_RATE = 1.0, 100_000.0  # messages per second
_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # DLQ name -> (lock, holders + waiters)
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
    # back into the subscription each message died in only (redrive_targets.py)
    subscription_only: bool = False
    # the caller's right to write a target, asked per message as it moves (a message that
    # arrives during the redrive with another REAL_TOPIC is checked too); None: no check
    may_write: Callable[[TopicName], bool] | None = None


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


def redrive_running(dlq_name: str) -> bool:
    """Whether a redrive of the dead letter topic `dlq_name` runs now (the ordered
    quarantine, key_quarantine.py, keeps a redriven key's new messages behind it meanwhile)."""
    return dlq_name in _running


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
    if req.subscription_only:
        letters = [dl for dl in live_dead_letters(topic) if req.filter.matches(dl) and dl.error is None]
        check_subscription_only(service, topic.name, req.target, letters)
        return
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


@contextlib.asynccontextmanager
async def _lock(topic: PersistentTopic) -> AsyncIterator[None]:
    """Hold the DLQ's lock; the lock is forgotten once nobody holds or waits for it."""
    key = str(topic.name)
    lock, users = _locks.get(key) or (asyncio.Lock(), 0)
    _locks[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _locks[key]
        if users <= 1:
            del _locks[key]
        else:
            _locks[key] = (lock, users - 1)


def _sub_target(dl: DeadLetter, req: RedriveRequest, dlq: TopicName,
                service: BrokerService) -> SubscriptionTarget | None:
    found = subscription_target(service, dl, dlq)
    if isinstance(found, str):
        return None
    if req.may_write is not None and not req.may_write(found.topic):
        return None
    return found


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
        if not flt.matches(dl):
            continue
        if redrive is None or (dl.error is None and (
                _sub_target(dl, redrive, topic.name, topic.service) is not None if redrive.subscription_only
                else _target_of(dl, redrive) is not None)):
            yield dl


def count_matching(topic: PersistentTopic, flt: DeadLetterFilter) -> int:
    """Live dead letters matching `flt`, movable or not."""
    return sum(1 for _ in _matching(topic, flt, None))


def count_redrivable(topic: PersistentTopic, req: RedriveRequest) -> int:
    return sum(1 for _ in _matching(topic, req.filter, req))


def _handled_cursor(topic: PersistentTopic) -> ManagedCursor:
    sub = handled_subscription(topic, create=True)
    assert sub is not None
    if not isinstance(sub.cursor, ManagedCursor):
        raise NotAllowed(f"subscription {sub.name} of {topic.name} is not durable")
    return sub.cursor


def claim(topic: PersistentTopic) -> asyncio.Event:
    """Become THE redrive of `topic` (RedriveRunning if one runs): its stop event."""
    key = str(topic.name)
    if key in _running:
        raise RedriveRunning(f"a redrive of {topic.name} is already running; cancel it first")
    stop = _running[key] = asyncio.Event()
    return stop


def release(topic: PersistentTopic) -> None:
    _running.pop(str(topic.name), None)


async def check(topic: PersistentTopic, req: RedriveRequest) -> int:
    """Refuse a redrive that cannot run (see the header), before anything is created;
    the number of messages it would move now."""
    async with _lock(topic):
        check_dead_letter_topic(topic)
        if req.subscription_only and not req.dry_run:
            _check_targets(topic, req)
        matched = count_redrivable(topic, req)
        if matched and not req.dry_run and not req.subscription_only:
            _check_targets(topic, req)
        return matched


async def redrive(topic: PersistentTopic, req: RedriveRequest) -> RedriveResult:
    stop = claim(topic)
    try:
        matched = await check(topic, req)
        if req.dry_run:
            return RedriveResult(matched, 0, matched, True)
        if not matched:
            return RedriveResult(0, 0, 0, False)  # nothing to move: create nothing either
        moved, remaining = await run(topic, req, stop)
        return RedriveResult(moved + remaining, moved, remaining, False, stop.is_set())
    finally:
        release(topic)


async def run(topic: PersistentTopic, req: RedriveRequest, stop: asyncio.Event,
              progress: ChunkProgress | None = None, resume: int = 0) -> tuple[int, int]:
    """Move chunk by chunk (the caller holds claim()); (moved, redrivable remaining)."""
    moved = await _move_chunks(topic, req, stop, progress, resume)
    async with _lock(topic):
        remaining = count_redrivable(topic, req)
    return moved, remaining


async def _move_chunks(topic: PersistentTopic, req: RedriveRequest, stop: asyncio.Event,
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
        async with _lock(topic):
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


def _select(topic: PersistentTopic, req: RedriveRequest, size: int, resume: int
            ) -> list[tuple[DeadLetter, TopicName, SubscriptionTarget | None]]:
    """Up to `size` matching messages from entry `resume` on, each with its target decided once."""
    out: list[tuple[DeadLetter, TopicName, SubscriptionTarget | None]] = []
    for dl in _matching(topic, req.filter, req, resume):
        if req.subscription_only:
            sub = _sub_target(dl, req, topic.name, topic.service)
            assert sub is not None  # _matching keeps only messages with a target
            out.append((dl, sub.topic, sub))
        else:
            name = _target_of(dl, req)
            assert name is not None
            out.append((dl, name, None))
        if len(out) >= size:
            break
    return out


async def _move_one_chunk(topic: PersistentTopic, req: RedriveRequest, size: int,
                          resume: int, progress: ChunkProgress | None) -> tuple[int, int]:
    """Append up to `size` matching messages from entry `resume` on to their
    targets and mark them handled, in one transaction: (count, next resume).
    Subscription-only: the same transaction acks each new entry on the other durable
    cursors of its topic. Nothing changes in memory unless it committed; a failed chunk
    stays in the DLQ (counted, logged once) and the storage error is raised."""
    service = topic.service
    cursor = _handled_cursor(topic)
    async with service.store.transaction() as txn:
        await txn.lock(cursor)
        chunk = _select(topic, req, size, resume)
        if not chunk:
            return 0, resume
        targets: dict[str, PersistentTopic] = {}
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
            await txn.lock(other)  # one fixed order: two redrives never wait on each other
        producer_name = f"{topic.name}-letterbox-redrive"
        now = service.clock.now_ms()
        for dl, name, sub in chunk:
            target = targets[str(name)]
            data = redriven_entry(dl, producer_name, txn.next_entry_id(target.ledger), now)
            appended = txn.append(target.ledger, data, 1, now)
            if sub is not None:
                for other in others[(str(name), sub.subscription)]:
                    txn.ack_appended(other, appended)
        mark_handled(txn, cursor, [dl for dl, _n, _s in chunk])
        last = chunk[-1][0].entry_id
        if progress is not None:
            progress.record(txn, len(chunk), last)
        try:
            await txn.commit()
        except StorageError as exc:
            service.storage_failed("redrive", exc, f"{len(chunk)} dead letters of {topic.name}")
            raise
    service.count_broker_appends(txn.appends)  # small hook (compat): redriven messages count as published
    if progress is not None:
        progress.committed(len(chunk), last)
    return len(chunk), last


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
            mark_handled(txn, cursor, chunk)
            try:
                await txn.commit()
            except StorageError as exc:
                topic.service.storage_failed("purge", exc, f"{len(chunk)} dead letters of {topic.name}")
                raise
        return len(chunk)
