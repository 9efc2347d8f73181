# The delivery attempt log of one subscription, broker side: records an
# Attempt (letterbox.failure.attempts) for each failure event — nack, ack
# timeout, redeliver-all, consumer gone — into the cursor's persisted
# delivery state (storage/attempt_log.py), reads it back, and
# gives the log a dead letter carries (DELIVERY_ATTEMPTS, failure/stamps.py).
# The happy path never comes here: a message that is delivered and acked has
# no log (its ack forgets it, like its count).
#
# Failure reasons: the wire cannot tell a nack from an ack timeout, and cannot
# carry a reason. A letterbox.client consumer subscribes with the consumer
# property ANNOUNCES_FAILURES and announces each nack (with its reason)
# through the admin API before it performs it (`announce`); its redelivery
# requests without an announcement are then its ack timeouts. A plain
# client's redelivery requests are recorded as nacks. On Exclusive and
# Failover the official clients ask for ALL unacked messages again on a nack
# (or an ack timeout): every message then gets an attempt (and a count), except
# that an announced nack in such a request names the one that failed.
# An announcement may name the exception's class and stack fingerprint (written
# in the attempt's row) and the rule its client matched for that class
# (failure/error_classes.py; `rules` hands them to the redelivery decision).
# Invariants: announcements are in memory only and bounded (MAX_ANNOUNCED
# per subscription, the oldest dropped); one is used by the first redelivery
# or consumer-gone of its entry (an acked entry's stays until pushed out: the
# ack path is not touched). The consumer of an attempt is the one that held
# the message (its pending-ack bookkeeping).
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from letterbox.broker.moves.failure_events import publish_failure_event
from letterbox.failure import Event, RedeliverAll
from letterbox.failure.attempts import (
    EXPIRED,
    NACK,
    TERMINATED,
    Attempt,
    clip_name,
    clip_reason,
    ending_for,
    last_reason,
)
from letterbox.failure.consumer_properties import ANNOUNCES_FAILURES
from letterbox.failure.error_classes import ErrorRule
from letterbox.failure.events import NACK as NACK_EVENT
from letterbox.failure.events import failure_event
from letterbox.message_properties import REASON_EXPIRED, REASON_TERMINATED, origin_message_id

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedConsumer, TrackedSubscription

MAX_ANNOUNCED = 10_000
Announced = tuple[str, "str | None", "tuple[str, str | None] | None", "ErrorRule | None"]
# the attempt a dead-letter move of this reason ends with (max-redeliveries: the
# failing delivery was recorded by the redelivery that decided it)
_FINAL_ENDING = {REASON_TERMINATED: TERMINATED, REASON_EXPIRED: EXPIRED}


class DeliveryAttempts:
    def __init__(self, sub: TrackedSubscription) -> None:
        self.sub = sub
        # entry id -> (ending, reason, (error class, fingerprint) or None, rule or None)
        self._announced: dict[int, Announced] = {}

    # --- recording ------------------------------------------------------------------
    def announce(self, entry_id: int, ending: str, reason: str | None, error: tuple[str, str | None] | None = None,
                 rule: ErrorRule | None = None) -> None:
        """A letterbox client is about to nack `entry_id`, for `reason` (`error`: the
        exception's class and stack fingerprint; `rule`: what its class means)."""
        announced = self._announced
        announced.pop(entry_id, None)
        if len(announced) >= MAX_ANNOUNCED:
            del announced[next(iter(announced))]
        announced[entry_id] = (ending, clip_reason(reason), error, rule)

    def rules(self, entry_ids: list[int]) -> dict[int, ErrorRule]:
        """The announced error-class rules of these entries (before record() uses them up)."""
        announced = self._announced
        if not announced:
            return {}
        out = {}
        for eid in entry_ids:
            said = announced.get(eid)
            if said is not None and said[3] is not None:
                out[eid] = said[3]
        return out

    def record(self, entry_ids: list[int], event: Event, consumer: TrackedConsumer | None,
               dead_lettered: frozenset[int] = frozenset()) -> None:
        """The deliveries of `entry_ids` to `consumer` ended with the failure `event`;
        `dead_lettered`: those this failure sends to the dead letter topic (their nack is
        told by the move's dead-letter event, not by a nack event of its own)."""
        sub = self.sub
        cursor = sub.cursor
        times = cursor.deliveries.times
        limit = sub.topic.service.config.attempt_log_size
        announces = consumer is not None and consumer.metadata.get(ANNOUNCES_FAILURES) == "true"
        name, address = (clip_name(consumer.name), consumer.cnx.remote) if consumer is not None else (None, None)
        now = sub.topic.service.clock.now_ms()
        announced = self._announced
        # On Exclusive/Failover the official clients turn a nack into "redeliver all":
        # when an announcing consumer's request carries an announced nack, the other
        # messages only come back with it and get no attempt.
        collateral = (announces and isinstance(event, RedeliverAll) and bool(announced)
                      and any(e in announced for e in entry_ids))
        unannounced = ending_for(event, None, announces)  # the ending of every message not announced
        rows: list[tuple[int, tuple[Any, ...]]] = []
        for eid in entry_ids:
            said = announced.pop(eid, None) if announced else None
            if said is None:
                if collateral:
                    continue
                ending, reason = unannounced, None
            else:
                ending, reason = ending_for(event, said[0], announces), said[1]
            # a row as Attempt.to_row lays it out, added without re-encoding the log
            t = times.get(eid)
            row: tuple[Any, ...] = (t[1] if t is not None else 0, now, name, address, ending, reason)
            if said is not None and said[2] is not None:
                row += said[2]
            rows.append((eid, row))
        cursor.add_attempts(rows, limit)
        for eid, row in rows:  # a nack with the client's reason: a failure event (if the namespace opted in)
            if row[4] == NACK and row[5] is not None and eid not in dead_lettered:
                publish_failure_event(sub.topic.service, failure_event(
                    NACK_EVENT, time_ms=now, topic=str(sub.topic.name), subscription=sub.name,
                    message_id=origin_message_id(sub.topic.ledger.ledger_id, eid, sub.topic.name.partition_index, -1),
                    reason=row[5], consumer=name))

    # --- reading ----------------------------------------------------------------------
    def attempts(self, entry_id: int, batch_index: int | None = None) -> list[Attempt]:
        """The recorded attempts of an unacknowledged message, oldest first ([] for an
        acknowledged one). The messages of a batch are redelivered together and share
        their entry's log; an acknowledged batch message has none."""
        cursor = self.sub.cursor
        if cursor.is_acked(entry_id):
            return []
        if batch_index is not None and batch_index >= 0 and batch_index in cursor.acked_indexes(entry_id):
            return []
        return [Attempt.from_row(r) for r in cursor.deliveries.attempts.get_rows(entry_id)]

    def last_failure_reason(self, entry_id: int) -> str | None:
        """The reason a client gave for the latest failure of the message that has one."""
        return last_reason(self.attempts(entry_id))

    def holder(self, entry_id: int) -> TrackedConsumer | None:
        """The consumer the message is delivered to and not yet acknowledged by."""
        for c in self.sub.consumers:
            if entry_id in c.pending:
                return c
        return None

    # --- dead letters -------------------------------------------------------------------
    def final_rows(self, entry_id: int, reason: str) -> tuple[tuple[Any, ...], ...] | None:
        """final_attempts() as the log's stored rows (Attempt.to_row's layout) when the move
        adds no attempt of its own (a max-redeliveries move); None when it does."""
        if reason in _FINAL_ENDING:
            return None
        cursor = self.sub.cursor
        return () if cursor.is_acked(entry_id) else cursor.deliveries.attempts.get_rows(entry_id)

    def final_attempts(self, entry_id: int, reason: str, description: str | None, now: int) -> list[Attempt]:
        """The log a dead letter of `entry_id` carries (DELIVERY_ATTEMPTS): the recorded
        attempts, plus the one the move ends when it is a terminate or an expiry (a
        max-redeliveries move was decided by a failure already recorded)."""
        attempts = self.attempts(entry_id)
        ending = _FINAL_ENDING.get(reason)
        if ending is None:
            return attempts
        holder = self.holder(entry_id)
        delivered = self.sub.cursor.deliveries.delivery_times(entry_id)[1] if holder is not None else 0
        attempts.append(Attempt(delivered, now, clip_name(holder.name) if holder else None,
                                holder.cnx.remote if holder else None, ending, clip_reason(description)))
        return attempts[-self.sub.topic.service.config.attempt_log_size:]
