# Poison-message early warning: the messages of a subscription that are still
# in it (unacknowledged) and have been redelivered more than half the times its
# dead-letter policy allows (redelivery count * 2 > max redeliveries), so users
# see and alert on a poison message before it reaches the dead letter topic.
# A subscription without a dead-letter policy has no limit, hence no suspects.
# Read from the cursor's delivery state (storage/delivery_state.py), which holds
# counts for unacknowledged entries only: counting is O(entries with a count),
# and a subscription with none (the common case) costs one dict check, which
# keeps the per-subscription gauge of /metrics cheap. The last failure reason
# is the attempt log's (`sub.redelivery.last_failure_reason(entry_id)`): the
# latest reason a client gave, null when none did (a plain client's nack).
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from letterbox import failure
from letterbox.message_properties import origin_message_id

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedSubscription


@dataclass(frozen=True)
class PoisonSuspect:
    entry_id: int
    message_id: str  # ledger:entry:partition:-1 (the ORIGIN_MESSAGE_ID form)
    redelivery_count: int
    max_redeliveries: int
    first_delivery_ms: int  # on the broker's clock; 0 when not recorded
    last_delivery_ms: int
    next_delivery_ms: int  # end of a pending backoff; 0 when none
    last_failure_reason: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "messageId": self.message_id, "entryId": self.entry_id,
            "redeliveryCount": self.redelivery_count, "deliveryCount": self.redelivery_count + 1,
            "maxRedeliveries": self.max_redeliveries,
            "firstDeliveryTime": self.first_delivery_ms or None,
            "lastDeliveryTime": self.last_delivery_ms or None,
            "nextDeliveryTime": self.next_delivery_ms or None,
            "lastFailureReason": self.last_failure_reason,
        }


def max_redeliveries(sub: TrackedSubscription) -> int | None:
    """The redeliveries the subscription's dead-letter policy allows, or None."""
    state = failure.DeliveryState(durable=sub.durable, topic_role=sub.topic_role)
    dl = failure.dead_letter_policy_for(state, sub.policy)
    return dl.max_redeliver_count if dl is not None else None


def suspect_count(sub: TrackedSubscription) -> int:
    counts = sub.cursor.deliveries.counts
    if not counts:
        return 0
    limit = max_redeliveries(sub)
    if limit is None:
        return 0
    return sum(1 for n in counts.values() if n * 2 > limit)


def suspects(sub: TrackedSubscription, limit: int | None = None) -> list[PoisonSuspect]:
    """The suspects, most redelivered first (then in entry order), at most `limit`."""
    top = max_redeliveries(sub)
    deliveries = sub.cursor.deliveries
    if top is None or not deliveries.counts:
        return []
    found = sorted(((n, e) for e, n in deliveries.counts.items() if n * 2 > top), key=lambda p: (-p[0], p[1]))
    if limit is not None:
        found = found[:limit]
    ledger_id, partition = sub.topic.ledger.ledger_id, sub.topic.name.partition_index
    out = []
    for n, eid in found:
        first, last = deliveries.delivery_times(eid)
        out.append(PoisonSuspect(
            entry_id=eid, message_id=origin_message_id(ledger_id, eid, partition, -1), redelivery_count=n,
            max_redeliveries=top, first_delivery_ms=first, last_delivery_ms=last,
            next_delivery_ms=deliveries.due.get(eid, 0), last_failure_reason=sub.redelivery.last_failure_reason(eid)))
    return out
