# Broker-side dead lettering (PIP-22's design, done atomically): the DLQ
# append and the acknowledgement in the source subscription are one storage
# transaction, so a crash can neither duplicate nor lose a dead letter.
# Default DLQ name: `<topic>-<subscription>-DLQ` in the source's namespace,
# the topic being the partitioned parent for a partition (one DLQ per
# subscription, not one per partition); a dead letter topic is never given a
# dead letter topic of its own (failure.naming.dead_letter_target). The
# stamps are the failure core's table. A DLQ topic keeps its messages even
# with no subscription (topics without cursors are never trimmed). A terminated
# DLQ takes nothing: the move is refused (NotAllowed naming it) and the messages
# stay unacknowledged in the source subscription, as with Pulsar's DLQ producer.
# The stamps' counts and delivery times come from the subscription's
# persisted delivery state (storage/delivery_state.py), and so does the
# attempt log a dead letter carries (DELIVERY_ATTEMPTS, FAILURE_DESCRIPTION:
# delivery_attempts.py).
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from letterbox import failure
from letterbox.broker.moves.failure_events import failure_events_wanted, publish_failure_event
from letterbox.broker.moves.move_transaction import MoveTransaction, refuse_terminated
from letterbox.broker.moves.moved_entry import SchemaMap, build_raw_moved_entry
from letterbox.errors import NotAllowed
from letterbox.failure import PolicyError, dead_letter_target
from letterbox.failure.events import DEAD_LETTER as DEAD_LETTER_EVENT
from letterbox.failure.events import PARK, TERMINATE, failure_event
from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DELIVERY_COUNT,
    FAILURE_DESCRIPTION,
    PARKED_BEHIND,
    REAL_TOPIC,
    REASON_MAX_REDELIVERIES,
    REASON_PARKED_BEHIND,
    REASON_TERMINATED,
    origin_message_id,
)
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedSubscription, MovedTopic
    from letterbox.storage.entry import Entry
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.transaction import PendingAppend

log = logging.getLogger("letterbox.dlq")
_ROLE = "dead letter topic"  # how a refusal names the target (a terminated one takes nothing)
MALFORMED_DESCRIPTION = "malformed message, moved as raw bytes"


def dead_letter_topic_name(source: TopicName, subscription: str, configured: str | None) -> TopicName:
    try:
        return TopicName.parse(dead_letter_target(str(source), subscription, configured))
    except PolicyError as exc:
        raise NotAllowed(str(exc)) from None


def dead_letter_stamps(
    sub: MovedSubscription,
    entry_id: int,
    reason: str,
    description: str | None,
    now: int,
    last_delivery_counted: bool,
) -> dict[str, str]:
    """The properties a dead letter gains: why, when, where from, its deliveries and
    their attempt log. `last_delivery_counted`: the redelivery count already includes
    the delivery that failed last (a max-redeliveries decision counts it before deciding)."""
    first, last = sub.cursor.deliveries.delivery_times(entry_id)
    count = sub.cursor.redelivery_count(entry_id) + (0 if last_delivery_counted else 1)
    rows = sub.tracker.log.final_rows(entry_id, reason)
    if rows is not None:  # (no Attempt made per row)
        return failure.dead_letter_stamps(reason, now, sub.name, count, first, last, description, attempt_rows=rows)
    attempts = sub.tracker.log.final_attempts(entry_id, reason, description, now)
    return failure.dead_letter_stamps(reason, now, sub.name, count, first, last, description, attempts)


async def move_to_dead_letter(
    sub: MovedSubscription,
    entry_ids: list[int],
    reason: str,
    dlq_topic: str | None,
    initial_subscription: str | None,
    description: str | None = None,
    stamps: Mapping[str, str] | None = None,
) -> int:
    """Move entries of `sub` to its dead letter topic; returns the messages moved.
    `stamps`: properties added to the dead-letter stamps (a parked message's PARKED_BEHIND).
    The DLQ appends and the acknowledgements are one transaction; nothing changes in memory
    unless it committed. If it failed, the entries stay unacknowledged (redeliverable), the
    failure is counted and logged once, and the storage error is raised. An entry that
    cannot be reopened (malformed) is moved as its original payload, the stamps and a
    DEAD_LETTER_DESCRIPTION saying why on its metadata: it is never retried forever."""
    source = sub.topic
    service = source.service
    target_name, target, cursor = _dead_letter_ends(sub, dlq_topic, initial_subscription)
    producer_name = f"{source.name}-{sub.name}-letterbox-DLQ"
    moved_ids: list[int] = []
    poisoned: list[tuple[Entry, int]] = []  # (entry, its DLQ entry id) for the ordered quarantine
    events: list[tuple[int, int, int, dict[str, str]]] = []  # (entry, batch index, DLQ entry id, stamps)
    moved = 0
    carry = service.schemas.carry_from(source.name).to(target_name)  # small hook (parity): schema on the DLQ
    async with MoveTransaction(service, "dead_letter") as move:
        await move.lock(cursor)
        now = service.clock.now_ms()  # stamps and publish time follow the broker's clock
        for eid in entry_ids:
            if cursor.is_acked(eid):
                continue
            entry = source.ledger.read_entry(eid)
            if entry is None:
                continue
            extra = dead_letter_stamps(sub, eid, reason, description, now,
                                       last_delivery_counted=reason in (REASON_MAX_REDELIVERIES, REASON_PARKED_BEHIND))
            if stamps:
                extra.update(stamps)
            dlq_entry_id = move.next_entry_id(target.ledger)
            prepared = _append_dead_letter(move, sub, entry, target.ledger, extra, producer_name, now, carry)
            moved_ids.append(eid)
            events.append((eid, _sole_index(entry, cursor.acked_indexes(eid)), dlq_entry_id, extra))
            if prepared is not None:
                poisoned.append((entry, dlq_entry_id))
                moved += prepared[1]
        if not moved_ids:
            return 0
        move.ack(cursor, moved_ids)
        sub.quarantine.record_poison(move.txn, cursor, reason, target_name, poisoned)
        refuse_terminated(service, target_name, _ROLE)  # terminated while this move waited
        await move.commit(f"{len(moved_ids)} entries of {source.name}/{sub.name}")
    for eid in moved_ids:
        sub.settle_acknowledged(eid)
    service.stats.dead_lettered(reason, moved, str(source.name), sub.name)
    _publish_events(sub, target, reason, events, now)
    log.info("dead-lettered %d message(s) of %s/%s to %s (%s)", moved, source.name, sub.name, target_name, reason)
    return moved


def _sole_index(entry: Entry, acked: frozenset[int]) -> int:
    """The batch index of the one message of a batch entry left unacknowledged (the one
    its dead letter holds), -1 for an entry of one message or of several left."""
    left = entry.num_messages - len(acked)
    if entry.num_messages < 2 or left != 1:
        return -1
    return next(i for i in range(entry.num_messages) if i not in acked)


def _publish_events(sub: MovedSubscription, target: MovedTopic, reason: str,
                    moved: list[tuple[int, int, int, dict[str, str]]], now: int) -> None:
    """One failure event per moved entry (failure/events.py): terminate, park or dead-letter;
    its message id names the batch index when one message of a batch was moved."""
    source = sub.topic
    if not failure_events_wanted(source.service, str(source.name)):  # (no event built for nothing)
        return
    kind = {REASON_TERMINATED: TERMINATE, REASON_PARKED_BEHIND: PARK}.get(reason, DEAD_LETTER_EVENT)
    part = source.name.partition_index
    for eid, index, dlq_eid, stamps in moved:
        publish_failure_event(source.service, failure_event(
            kind, time_ms=now, topic=str(source.name), subscription=sub.name,
            message_id=origin_message_id(source.ledger.ledger_id, eid, part, index), reason=reason,
            description=stamps.get(FAILURE_DESCRIPTION), deliveryCount=_int(stamps.get(DELIVERY_COUNT)),
            parkedBehind=stamps.get(PARKED_BEHIND), deadLetterTopic=str(target.name),
            deadLetterMessageId=origin_message_id(target.ledger.ledger_id, dlq_eid, target.name.partition_index, -1),
        ))


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _dead_letter_ends(sub: MovedSubscription, dlq_topic: str | None, initial_subscription: str | None
                      ) -> tuple[TopicName, MovedTopic, ManagedCursor]:
    """The dead letter topic of `sub` (created, with its initial subscription) and the source
    cursor, or NotAllowed before anything is read: a non-persistent or terminated dead letter
    topic, a non-durable subscription."""
    source = sub.topic
    service = source.service
    target_name = dead_letter_topic_name(source.name, sub.name, dlq_topic)
    if not target_name.persistent:
        raise NotAllowed(f"dead letter topic {target_name} must be persistent")
    target = service.persistent_topic(target_name, create=True)
    if initial_subscription and initial_subscription not in target.subscriptions:
        target.subscription_for(initial_subscription, True, "earliest", None)
    cursor = sub.cursor
    if not isinstance(cursor, ManagedCursor):
        raise NotAllowed("only durable subscriptions dead-letter on the broker")
    refuse_terminated(service, target_name, _ROLE)  # the messages stay unacknowledged (redelivered)
    return target_name, target, cursor


def _append_dead_letter(move: MoveTransaction, sub: MovedSubscription, entry: Entry, dlq: ManagedLedger,
                        extra: dict[str, str], producer_name: str, now: int, carry: SchemaMap
                        ) -> tuple[PendingAppend, int] | None:
    """Append `entry`'s unacknowledged messages, stamped, to the dead letter ledger in `move`
    (None: none left); a malformed entry goes as its original bytes, saying why."""
    source = sub.topic
    eid = entry.position.entry_id
    try:
        return move.append_moved(
            entry, source.name, dlq, extra=extra,
            skip_indexes=sub.cursor.acked_indexes(eid), producer_name=producer_name, now=now,
            limit=source.service.config.max_message_size, schema=carry,
        )
    except Exception as exc:  # a malformed entry: its original bytes, with the reason
        log.warning("entry %d of %s is malformed (%s): dead-lettered as raw bytes", eid, source.name, exc)
        raw = build_raw_moved_entry(
            entry.data, ledger_id=entry.position.ledger_id, entry_id=eid,
            partition=source.name.partition_index, num_messages=entry.num_messages,
            extra={**extra, REAL_TOPIC: str(source.name),
                   DEAD_LETTER_DESCRIPTION: f"{MALFORMED_DESCRIPTION}: {exc}"},
            producer_name=producer_name, sequence_id=move.next_entry_id(dlq), publish_time=now,
            schema=carry,
        )
        return move.append(dlq, raw, entry.num_messages, now), entry.num_messages
