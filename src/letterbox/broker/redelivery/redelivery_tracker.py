# Pulsar's RedeliveryTracker and DelayedDeliveryTracker for one subscription:
# it owns what happens to a message that comes back (nack, ack timeout,
# redeliver-all, its consumer gone) or must wait (delayed delivery, backoff).
# Every such decision is letterbox.failure.decide()'s; this module gathers the
# message's state, applies the outcome and keeps the counts and times in the
# cursor's persisted delivery state (storage/delivery_state.py):
#   Deliver      -> back in the dispatcher's replay queue now
#   DeliverAt(t) -> held in the delayed index until t; a backoff's t is also
#                   written in the record, so after a restart the message is
#                   held again until t instead of being sent at once
#   DeadLetter   -> moved to the dead letter topic (dead_letter_router.py, in the
#                   subscription's next batch: dead_letter_batches.py); if the
#                   move fails the message stays unacked and is queued again
# Each failure event also adds an attempt to the message's delivery attempt log
# (delivery_attempts.py), written with the count; `attempts()` and
# `last_failure_reason()` read it (the API other modules use: sub.redelivery).
# Invariants: after a nack round, counts are incremented and made durable
# before the messages can be delivered again (on degraded storage they are
# kept in memory and written once the store can); an outcome computed before
# a seek (`epoch`) is dropped.
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from letterbox import failure
from letterbox.broker.moves.dead_letter_batches import DeadLetterBatches
from letterbox.broker.redelivery.circuit_breaker import CircuitBreaker
from letterbox.broker.redelivery.delayed_index import DelayedDeliveryTracker
from letterbox.broker.redelivery.delivery_attempts import DeliveryAttempts
from letterbox.clock import Clock, Timer
from letterbox.failure.circuit import REOPEN, Verdict
from letterbox.failure.decide import DELAYS_HONOURED
from letterbox.protocol import parse_entry_metadata
from letterbox.storage.entry import UNREAD
from letterbox.storage.errors import StorageError

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedConsumer, TrackedSubscription
    from letterbox.failure.attempts import Attempt
    from letterbox.storage.entry import Entry


class RedeliveryTracker:
    def __init__(self, sub: TrackedSubscription) -> None:
        self.sub = sub
        self.epoch = 0  # bumped by seeks, so late outcomes for old positions are dropped
        self.msg_redelivered = 0
        self.clock: Clock = sub.topic.service.clock  # backoff and delays follow the broker's clock
        self._delayed = DelayedDeliveryTracker(self.clock.now_ms)
        self._timer: Timer | None = None
        self._timer_at = 0
        self.log = DeliveryAttempts(sub)
        self._dead_letters = DeadLetterBatches(sub)  # its dead-letter moves, batched while one is in flight
        self.circuit = CircuitBreaker(sub, self.clock, self._release_probes)  # outage detection
        self._held_probes: set[int] = set()  # failed probes held until after the next probe
        self._released: set[int] = set()  # of those, released early (the circuit closed)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # --- the message's state, as decide() sees it ---------------------------------
    def state(self, entry_id: int) -> failure.DeliveryState:
        sub = self.sub
        first, last = sub.cursor.deliveries.delivery_times(entry_id)
        return failure.DeliveryState(
            redelivery_count=sub.cursor.redelivery_count(entry_id),
            first_delivery_ms=first,
            last_delivery_ms=last,
            sub_type=failure.SubscriptionType(sub.sub_type or 0),
            durable=sub.durable,
            topic_role=sub.topic_role,
        )

    # --- messages that come back ---------------------------------------------------
    def shared_state(self) -> failure.DeliveryState:
        """What every message of the subscription has in common, as decide() sees it."""
        sub = self.sub
        return failure.DeliveryState(sub_type=failure.SubscriptionType(sub.sub_type or 0), durable=sub.durable,
                                     topic_role=sub.topic_role)

    def redeliver(self, entry_ids: list[int], event: failure.Event, consumer: TrackedConsumer | None = None,
                  uncounted: list[int] | None = None) -> None:
        """Nack, ack timeout or redeliver-all of messages taken off their consumer: one
        decision for the whole request (failure.decide_redeliveries), one record write.
        `uncounted`: messages of the same request queued again with them, not counted."""
        self.msg_redelivered += len(entry_ids)
        cursor = self.sub.cursor
        count, times = cursor.redelivery_count, cursor.deliveries.delivery_times
        rules = self.log.rules(entry_ids)  # error classes a letterbox.client named (error_classes.py)
        # a failure the consumer declared non-retryable says "this message is bad", not "we are
        # down": it stays out of the outage window and is dead-lettered even while the circuit is open
        declared = {e for e, r in rules.items() if r.non_retryable} if rules else set()
        suspects = [e for e in entry_ids if e not in declared] if declared else entry_ids
        verdict = self.circuit.failed(suspects) if suspects else None
        if verdict is not None and not verdict.counted:
            self.log.record(suspects, event, consumer)
            self._not_counted(suspects, verdict, uncounted)
            if not declared:
                return
            entry_ids, uncounted = [e for e in entry_ids if e in declared], None
        outcomes = failure.decide_redeliveries(
            [count(e) for e in entry_ids], [times(e)[1] for e in entry_ids], self.shared_state(), event,
            self.sub.policy, self.now_ms())
        if rules:
            for i, eid in enumerate(entry_ids):
                rule = rules.get(eid)
                if rule is not None:
                    outcomes[i] = failure.decide(self.state(eid), failure.Nack(rule), self.sub.policy, self.now_ms())
        dead = frozenset(e for e, o in zip(entry_ids, outcomes, strict=True) if isinstance(o, failure.DeadLetter))
        self.log.record(entry_ids, event, consumer, dead)
        cursor.increment_redelivery(entry_ids)
        self._apply(dict(zip(entry_ids, outcomes, strict=True)), uncounted)

    def consumer_gone(self, entry_id: int, consumer: TrackedConsumer | None = None) -> bool:
        """The consumer holding `entry_id` (the oldest of its pending messages) went
        away. True when the message was taken for the dead letter topic; otherwise the
        caller queues it again with the consumer's other pending messages."""
        verdict = self.circuit.failed([entry_id])
        if verdict is not None and not verdict.counted:
            self.log.record([entry_id], failure.ConsumerGone(seen=True), consumer)
            self._not_counted([entry_id], verdict, None, park=False)
            return False
        outcome = failure.decide(self.state(entry_id), failure.ConsumerGone(seen=True), self.sub.policy, self.now_ms())
        self.log.record([entry_id], failure.ConsumerGone(seen=True), consumer)
        self.sub.cursor.increment_redelivery([entry_id])
        if isinstance(outcome, failure.DeadLetter):
            self._apply({entry_id: outcome})
            return True
        return False

    def _not_counted(self, entry_ids: list[int], verdict: Verdict, uncounted: list[int] | None,
                     park: bool = True) -> None:
        """Failures during an outage (the circuit is open, or they tripped it): not counted,
        and a trip gives back the counts of the failures in its window. A failed probe waits
        until just after the next probe time, so the next probe is another message (a poison
        message as probe would otherwise keep the circuit open)."""
        cursor = self.sub.cursor
        if verdict.uncount:  # (written by the record write below: _apply's or write_now)
            deliveries = cursor.deliveries
            for eid, by in verdict.uncount.items():
                if not cursor.is_acked(eid):
                    deliveries.lower(eid, by)
        t = verdict.transition
        outcomes: dict[int, failure.Outcome] = {}
        if park:
            outcomes = dict.fromkeys(entry_ids, failure.Deliver())
            if t is not None and t.cause == REOPEN and t.probe in outcomes:
                outcomes[t.probe] = failure.DeliverAt(t.at_ms + self.circuit_cooldown_ms() + 1)
                self._held_probes.add(t.probe)
                self._released.discard(t.probe)
        if outcomes or uncounted:
            self._apply(outcomes, uncounted)
        elif verdict.uncount:
            with contextlib.suppress(StorageError):
                cursor.write_now()

    def _release_probes(self) -> None:
        """The circuit closed: failed probes still held go out now (their timers, when they
        fire, skip them)."""
        held, self._held_probes = self._held_probes, set()
        cursor = self.sub.cursor
        for eid in held:
            cursor.set_due(eid, None)
        self._released |= held
        self.sub.dispatcher.park(sorted(held))

    def circuit_cooldown_ms(self) -> int:
        policy = self.sub.policy.circuit
        return policy.cooldown_ms if policy is not None else 0

    def _apply(self, outcomes: dict[int, failure.Outcome], uncounted: list[int] | None = None) -> None:
        sub = self.sub
        cursor = sub.cursor
        now_ids: list[int] = list(uncounted or ())
        later: list[tuple[int, int]] = []
        dead: dict[str, list[int]] = {}
        for eid, outcome in outcomes.items():
            if isinstance(outcome, failure.DeadLetter):
                dead.setdefault(outcome.reason, []).append(eid)
            elif isinstance(outcome, failure.DeliverAt):
                later.append((eid, outcome.at_ms))
                cursor.set_due(eid, outcome.at_ms)
            else:
                now_ids.append(eid)
        dl = failure.dead_letter_policy_for(self.shared_state(), sub.policy) if dead else None
        epoch = self.epoch
        # the counts just made, durable before the messages go out again: written at once
        # (one record write, not a background one and a flush), unless a move below
        # writes them with its transaction or a transaction holds the cursor (flush then)
        written_now = None
        if dead:
            cursor.write_by_caller()  # by the move's transaction (or the flush below if it fails)
        else:
            with contextlib.suppress(StorageError):
                written_now = cursor.write_now()

        async def settle() -> None:
            try:
                # a committed move wrote the cursor's record, with this round's counts
                # (they were made before its snapshot): no second write is needed then
                written = False
                for reason, ids in dead.items():
                    assert dl is not None
                    try:
                        if await asyncio.shield(self._dead_letters.move(ids, reason, dl.dead_letter_topic,
                                                                        dl.initial_subscription_name)):
                            written = True
                    except StorageError:  # counted and logged by the move; the messages stay unacked
                        now_ids.extend(ids)
                    except Exception as exc:  # e.g. a dead letter topic that cannot be created
                        sub.topic.service.storage_failed("dead_letter", exc, f"{len(ids)} entries of "
                                                         f"{sub.topic.name}/{sub.name}")
                        now_ids.extend(ids)
                # on degraded storage (said by the store) the counts stay in memory and the
                # record is written again once it can be
                if not written:
                    with contextlib.suppress(StorageError):
                        await (written_now if written_now is not None else cursor.flush())
            finally:
                if epoch == self.epoch:  # a seek in between makes these ids stale
                    sub.dispatcher.park(now_ids)
                    for eid, at in later:
                        self.delay(eid, at)
                    sub.dispatcher.schedule()

        sub.topic.service.track(asyncio.ensure_future(settle()))

    # --- the attempt log -----------------------------------------------------------------
    def attempts(self, entry_id: int, batch_index: int | None = None) -> list[Attempt]:
        """The failed deliveries of an unacknowledged message, oldest first."""
        return self.log.attempts(entry_id, batch_index)

    def last_failure_reason(self, entry_id: int) -> str | None:
        """The latest reason a client gave for a failure of the message, or None."""
        return self.log.last_failure_reason(entry_id)

    # --- messages held back until a time --------------------------------------------
    def hold(self, entry: Entry) -> bool:
        """A new entry read by the dispatcher: True when it must wait (its delayed
        delivery time, or a backoff recorded before a restart), and is now held."""
        eid = entry.position.entry_id
        at = self.sub.cursor.deliveries.due.get(eid, 0)
        # the metadata is read only where decide() may honour a delivery time
        if self.sub.sub_type in DELAYS_HONOURED:
            deliver_at = entry.deliver_at_time
            if deliver_at == UNREAD:  # read back from disk: its publisher's parse is gone
                meta = parse_entry_metadata(entry.data)
                deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else None
            if deliver_at is not None:
                outcome = failure.decide(self.state(eid), failure.Dispatch(deliver_at),
                                         self.sub.policy, self.now_ms())
                if isinstance(outcome, failure.DeliverAt):
                    at = max(at, outcome.at_ms)
        if at and self._delayed.add(eid, at):
            self._arm_timer()
            return True
        return False

    def on_send(self, entry_id: int) -> None:
        """The dispatcher is sending the entry: its backoff is over, note the delivery."""
        deliveries = self.sub.cursor.deliveries
        if deliveries.due:
            deliveries.pop_due(entry_id)
        if self.circuit.circuit is not None:
            self.circuit.sent(entry_id)
        policy = self.sub.policy
        if policy.dead_letter is not None or policy.backoff is not None:
            deliveries.delivered(entry_id, self.clock.now_ms())

    def on_send_run(self, entry_ids: list[int]) -> None:
        """on_send for each of many entries the dispatcher is sending together."""
        deliveries = self.sub.cursor.deliveries
        if deliveries.due:
            for eid in entry_ids:
                deliveries.pop_due(eid)
        policy = self.sub.policy
        if policy.dead_letter is not None or policy.backoff is not None:
            deliveries.delivered_run(entry_ids, self.clock.now_ms())

    def delay(self, entry_id: int, deliver_at_ms: int) -> None:
        """Hold an entry back until `deliver_at_ms`, then queue it for dispatch."""
        if not self._delayed.add(entry_id, deliver_at_ms):
            self.sub.dispatcher.park([entry_id])
            return
        self._arm_timer()

    def _arm_timer(self) -> None:
        due = self._delayed.next_due_ms()
        if due is None:
            return
        if self._timer is not None:
            if self._timer_at <= due:
                return
            self._timer.cancel()
        self._timer_at = due
        self._timer = self.clock.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        due = self._delayed.pop_due(self.now_ms())
        if due and (self._released or self._held_probes):
            self._held_probes.difference_update(due)
            released = self._released
            if released:
                gone = released.intersection(due)
                released -= gone
                due = [e for e in due if e not in gone]
        if due:
            self.sub.dispatcher.park(due)
            self.sub.dispatcher.schedule()
        self._arm_timer()

    def delayed_count(self) -> int:
        return len(self._delayed)

    def reset(self) -> None:
        """Seek: forget everything held; outcomes still being settled are dropped."""
        self.epoch += 1
        self._delayed.clear()
        self._held_probes.clear()
        self._released.clear()

