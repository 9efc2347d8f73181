# Operations the admin API performs on one subscription: skip N messages,
# clear the backlog, reset the cursor (to an entry or a publish time), expire
# messages older than an age, peek the n-th unacknowledged message, and
# disconnect the consumers. Every change is made on the cursor first, then
# made durable (cursor flush or one storage transaction) before the call
# returns, so an admin call that answered survives a crash.
# Effects on connected consumers follow Pulsar: a reset disconnects them (the
# client re-subscribes and receives from the new position); skipped, cleared
# and expired messages are acknowledged, so the dispatcher never sends them
# (messages a consumer already holds are forgotten as if it had acked them).
# What expiry does is the failure core's decision (decide(Expired)): dead-letter
# (reason "expired") when a dead-letter policy applies, else acknowledge; a
# namespace TTL leaves dead letter and retry topics alone. The internal
# subscription that marks redriven/purged dead letters never expires. Expiry
# judges every entry by its own publish time (entry order is not publish-time
# order), and one call works through the whole backlog, a chunk per storage
# transaction, before it returns.
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letter_router import move_to_dead_letter
from letterbox.broker.redelivery.expiry_scan import due_entries
from letterbox.failure import (
    HANDLED_SUBSCRIPTION,
    Acknowledge,
    DeadLetter,
    DeadLetterPolicy,
    DeliveryState,
    Expired,
    dead_letter_policy_for,
    decide,
    topic_role,
)
from letterbox.storage.errors import StorageError
from letterbox.storage.managed_cursor import ManagedCursor

if TYPE_CHECKING:
    from letterbox.broker.topics.subscription import Subscription
    from letterbox.storage.entry import Entry

EXPIRE_CHUNK = 500  # entries dead-lettered per storage transaction of an expiry
ACK_CHUNK = 65_536  # entries acknowledged per storage transaction of an expiry


def disconnect_consumers(sub: Subscription) -> None:
    for consumer in list(sub.consumers):
        consumer.cnx.close_consumer(consumer.consumer_id)
        sub.remove_consumer(consumer)


def unacked_entries(sub: Subscription, below: int | None = None, limit: int | None = None) -> list[int]:
    """Entry ids not (fully) acknowledged, oldest first, below entry `below`."""
    ledger = sub.topic.ledger
    last = ledger.last_confirmed.entry_id if below is None else min(below - 1, ledger.last_confirmed.entry_id)
    start = max(sub.cursor.mark_delete.entry_id + 1, ledger.first_position.entry_id)
    out: list[int] = []
    for eid in range(start, last + 1):
        if not sub.cursor.is_acked(eid):
            out.append(eid)
            if limit is not None and len(out) >= limit:
                break
    return out


def _forget(sub: Subscription, entry_ids: list[int]) -> None:
    for eid in entry_ids:
        sub.settle_acknowledged(eid)


async def skip(sub: Subscription, n: int) -> int:
    """Acknowledge the oldest `n` unacknowledged entries; returns how many."""
    ids = unacked_entries(sub, limit=n)
    if ids:
        sub.cursor.ack(ids)
        _forget(sub, ids)
    await sub.cursor.flush()
    return len(ids)


async def _ack_through(sub: Subscription, last: int, operation: str = "clear_backlog") -> None:
    """Acknowledge every entry up to `last` (inclusive), durably: in one transaction for a
    durable subscription, whose in-memory state changes only once it committed."""
    cursor = sub.cursor
    if not isinstance(cursor, ManagedCursor):
        if last > cursor.mark_delete.entry_id:
            cursor.ack_cumulative(last)
        _forget(sub, [e for c in sub.consumers for e in c.pending if e <= last])
        return
    service = sub.topic.service
    async with service.store.transaction() as txn:
        await txn.lock(cursor)
        if last > cursor.mark_delete.entry_id:
            txn.ack_cumulative(cursor, last)
        try:
            await txn.commit()
        except StorageError as exc:
            service.storage_failed(operation, exc, f"{sub.topic.name}/{sub.name} through {last}")
            raise
    _forget(sub, [e for c in sub.consumers for e in c.pending if e <= last])


async def clear_backlog(sub: Subscription) -> None:
    await _ack_through(sub, sub.topic.ledger.last_confirmed.entry_id)


async def reset_cursor(sub: Subscription, next_entry_id: int) -> None:
    """Move the subscription so that `next_entry_id` is the next message delivered;
    connected consumers are disconnected and receive from there when they return."""
    ledger = sub.topic.ledger
    next_entry_id = max(ledger.first_position.entry_id, min(next_entry_id, ledger.last_confirmed.entry_id + 1))
    sub.reset_to(next_entry_id)
    disconnect_consumers(sub)
    await sub.cursor.flush()


def entry_at_time(sub: Subscription, timestamp_ms: int) -> int:
    """The first entry published at or after `timestamp_ms`."""
    return sub.topic.ledger.find_entry_by_publish_time(timestamp_ms).entry_id


async def _ack_entries(sub: Subscription, entry_ids: list[int]) -> None:
    """Acknowledge `entry_ids` durably (one transaction for a durable subscription; its
    in-memory state changes only once it committed)."""
    cursor = sub.cursor
    if not isinstance(cursor, ManagedCursor):
        cursor.ack(entry_ids)
        return
    service = sub.topic.service
    async with service.store.transaction() as txn:
        await txn.lock(cursor)
        first, last = entry_ids[0], entry_ids[-1]
        if first == cursor.mark_delete.entry_id + 1 and last - first + 1 == len(entry_ids):
            txn.ack_cumulative(cursor, last)  # the common case: a run from the mark-delete position
        else:
            txn.ack(cursor, entry_ids)
        try:
            await txn.commit()
        except StorageError as exc:
            service.storage_failed("expire", exc, f"{sub.topic.name}/{sub.name}: {len(entry_ids)} entries")
            raise


class ExpiryInterrupted(StorageError):
    """A storage failure after part of an expiry was done: `expired` entries stay
    expired, the rest is as it was (a new call finishes the job)."""

    def __init__(self, expired: int, cause: StorageError) -> None:
        super().__init__(str(cause))
        self.expired = expired


async def expire(
    sub: Subscription, max_age_seconds: int, now_ms: int | None = None, by_namespace_ttl: bool = False
) -> int:
    """Expire every unacknowledged message published more than `max_age_seconds` ago
    (on the broker's clock), as the failure core decides (dead-letter, acknowledge, or
    leave a failure topic alone under a namespace TTL), before returning. Works through
    the entries up to the last one confirmed when called, EXPIRE_CHUNK entries per
    dead-letter transaction (ACK_CHUNK per acknowledgement). A storage failure raises
    (ExpiryInterrupted if chunks before it were done: those stay expired, the failed one
    is untouched, a new call finishes the job). Returns the entries expired."""
    if sub.name == HANDLED_SUBSCRIPTION:
        return 0  # its acknowledgements are redrive/purge marks, not consumption
    now_ms = sub.topic.service.clock.now_ms() if now_ms is None else now_ms
    # the decision does not depend on a message's count: one per subscription
    state = DeliveryState(durable=sub.durable, topic_role=topic_role(str(sub.topic.name)))
    policy = sub.policy
    outcome = decide(state, Expired(by_namespace_ttl), policy, now_ms)
    if not isinstance(outcome, Acknowledge | DeadLetter):
        return 0
    cutoff = now_ms - max_age_seconds * 1000
    dl = dead_letter_policy_for(state, policy) if isinstance(outcome, DeadLetter) else None  # None: ack
    last = sub.topic.ledger.last_confirmed.entry_id
    position = sub.cursor.mark_delete.entry_id + 1
    expired = 0
    try:
        while position <= last:
            position, done = await _expire_chunk(sub, outcome, dl, cutoff, position, last)
            expired += done
    except StorageError as exc:
        if expired:
            raise ExpiryInterrupted(expired, exc) from exc
        raise
    return expired


async def _expire_chunk(
    sub: Subscription, outcome: Acknowledge | DeadLetter, dl: DeadLetterPolicy | None,
    cutoff: int, position: int, last: int,
) -> tuple[int, int]:
    """Expire the next chunk of due entries from `position` in one storage transaction;
    returns where to go on from and the entries expired."""
    if dl is not None and isinstance(outcome, DeadLetter):
        ids, position = due_entries(sub, cutoff, position, last, EXPIRE_CHUNK)
        if ids:
            await move_to_dead_letter(sub, ids, outcome.reason, dl.dead_letter_topic, dl.initial_subscription_name)
    else:
        ids = []
        while position <= last and len(ids) < ACK_CHUNK:  # due_entries gives control back
            found, position = due_entries(sub, cutoff, position, last, ACK_CHUNK - len(ids))
            ids += found
            if position <= last:
                await asyncio.sleep(0)  # a long backlog: let the loop run meanwhile
        if ids:
            await _ack_entries(sub, ids)
    if not ids:
        await asyncio.sleep(0)
        return position, 0
    _forget(sub, ids)
    return position, len(ids)


def peek_nth(sub: Subscription, n: int) -> Entry | None:
    """The n-th (1-based) unacknowledged entry of the subscription, or None."""
    ids = unacked_entries(sub, limit=n)
    if len(ids) < n:
        return None
    return sub.topic.ledger.read_entry(ids[n - 1])
