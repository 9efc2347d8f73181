# Broker-side dead lettering (PIP-22's design, done atomically): the DLQ
# append and the acknowledgement in the source subscription are one storage
# transaction, so a crash can neither duplicate nor lose a dead letter.
# Default DLQ name: `<topic>-<subscription>-DLQ` in the source's namespace,
# the topic being the partitioned parent for a partition (one DLQ per
# subscription, not one per partition). A DLQ topic keeps its messages even
# with no subscription (topics without cursors are never trimmed).
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from letterbox.broker.moved_entry import prepare_moved_append
from letterbox.errors import NotAllowed
from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DEAD_LETTER_REASON,
    DEAD_LETTER_SUBSCRIPTION,
    DEAD_LETTER_TIME,
    DELIVERY_COUNT,
    FIRST_DELIVERY_TIME,
    LAST_DELIVERY_TIME,
    REASON_MAX_REDELIVERIES,
)
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.storage.ops import WriteOp
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.subscription import Subscription
    from letterbox.broker.topic import PersistentTopic

log = logging.getLogger("letterbox.dlq")


def dead_letter_topic_name(source: TopicName, subscription: str, configured: str | None) -> TopicName:
    if configured:
        return TopicName.parse(configured)
    parent = source.partitioned_parent
    return TopicName(parent.domain, parent.tenant, parent.namespace, f"{parent.local}-{subscription}-DLQ")


def dead_letter_stamps(
    sub: Subscription,
    entry_id: int,
    reason: str,
    description: str | None,
    now: int,
    last_delivery_counted: bool,
) -> dict[str, str]:
    """The properties a dead letter gains: why, when, where from, and its deliveries.
    `last_delivery_counted`: the redelivery count already includes the delivery that
    failed last (a max-redeliveries decision counts it before deciding)."""
    extra = {
        DEAD_LETTER_REASON: reason,
        DEAD_LETTER_TIME: str(now),
        DEAD_LETTER_SUBSCRIPTION: sub.name,
        DELIVERY_COUNT: str(sub.cursor.redelivery_count(entry_id) + (0 if last_delivery_counted else 1)),
    }
    first, last = sub.delivery_times(entry_id)
    if first:
        extra[FIRST_DELIVERY_TIME] = str(first)
        extra[LAST_DELIVERY_TIME] = str(last)
    if description:
        extra[DEAD_LETTER_DESCRIPTION] = description
    return extra


async def move_to_dead_letter(
    sub: Subscription,
    entry_ids: list[int],
    reason: str,
    dlq_topic: str | None,
    initial_subscription: str | None,
    description: str | None = None,
) -> int:
    """Move entries of `sub` to its dead letter topic; returns the messages moved."""
    from letterbox.broker.topic import PersistentTopic

    source: PersistentTopic = sub.topic
    service = source.service
    target_name = dead_letter_topic_name(source.name, sub.name, dlq_topic)
    if not target_name.persistent:
        raise NotAllowed(f"dead letter topic {target_name} must be persistent")
    target = service.get_topic(target_name, create=True)
    assert isinstance(target, PersistentTopic)
    if initial_subscription and initial_subscription not in target.subscriptions:
        target.subscription_for(initial_subscription, True, "earliest", None)
    cursor = sub.cursor
    if not isinstance(cursor, ManagedCursor):
        raise NotAllowed("only durable subscriptions dead-letter on the broker")
    now = int(time.time() * 1000)
    producer_name = f"{source.name}-{sub.name}-letterbox-DLQ"
    ops: list[WriteOp] = []
    moved_ids: list[int] = []
    moved = 0
    for eid in entry_ids:
        if cursor.is_acked(eid):
            continue
        entry = source.ledger.read_entry(eid)
        if entry is None:
            continue
        extra = dead_letter_stamps(sub, eid, reason, description, now,
                                   last_delivery_counted=reason == REASON_MAX_REDELIVERIES)
        prepared = prepare_moved_append(
            entry, source.name, target.ledger, extra=extra, skip_indexes=cursor.acked_indexes(eid),
            producer_name=producer_name, now=now, limit=source.service.config.max_message_size,
        )
        moved_ids.append(eid)
        if prepared is None:
            continue
        append, count = prepared
        ops.append(append)
        moved += count
    if not moved_ids:
        return 0
    cursor.ack(moved_ids)
    ops.append(cursor.commit_op())
    await service.store.transaction(ops)
    for eid in moved_ids:
        sub.forget_delivery(eid)
    service.stats.dead_lettered(reason, moved)
    log.info("dead-lettered %d message(s) of %s/%s to %s (%s)", moved, source.name, sub.name, target_name, reason)
    return moved
