# The ordered quarantine of one subscription (`letterbox.dlq.on_key_failure =
# park`, decisions in letterbox.failure.key_quarantine): the dispatcher asks
# `admit(entry)` before it dispatches an entry; the dead-letter paths call
# `record_poison` inside their storage transaction; the subscription reports
# settled (acknowledged or moved) entries.
# State:
#   poisoned keys  PERSISTED as two cursor properties per key (the source entry
#                  of the poisoned message, its entry in the dead letter topic),
#                  written in the SAME transaction as the poisoned message's
#                  dead-letter move, so a crash never leaves a poisoned message
#                  in the DLQ with its key unpoisoned (or the reverse); removed
#                  once the poisoned dead letter was redriven or purged (marked
#                  on the DLQ's handled cursor, dead_letters.py) and no redrive of
#                  the DLQ runs.
#   out / waiting  in memory: per key, the one entry out (delivered and not yet
#                  settled) and the entries read behind it, in entry order. After
#                  a restart the dispatcher reads from the mark-delete position
#                  again and rebuilds them.
#   to park        in memory: entries of poisoned keys not yet moved, in read
#                  order; one task moves them, a run of one key per transaction,
#                  so the dead letter topic holds a key's parked messages in order.
# Invariants: an entry is in at most one of out / waiting / to park; an entry
# parked is acknowledged in the subscription in the transaction that appends it
# to the DLQ (dead_letter_router.move_to_dead_letter); entries of no key are
# never held.
from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letter_router import dead_letter_topic_name, move_to_dead_letter
from letterbox.broker.moves.dead_letters import handled_subscription
from letterbox.errors import LetterboxError
from letterbox.failure import key_quarantine as kq
from letterbox.message_properties import (
    ORIGIN_MESSAGE_ID,
    PARKED_BEHIND,
    REAL_TOPIC,
    REASON_PARKED_BEHIND,
    origin_message_id,
)
from letterbox.protocol import MalformedFrame, parse_entry_metadata
from letterbox.storage.errors import StorageError
from letterbox.storage.managed_cursor import ManagedCursor

if TYPE_CHECKING:
    from letterbox.broker.redelivery.tracked import TrackedSubscription
    from letterbox.storage.entry import Entry
    from letterbox.storage.transaction import Transaction
    from letterbox.topic_name import TopicName

log = logging.getLogger("letterbox.quarantine")
POISON_ENTRY = "letterbox.poisoned.entry:"  # + key -> source entry id of the poisoned message
POISON_DLQ = "letterbox.poisoned.dlq:"  # + key -> its entry id in the dead letter topic
MAX_WAITING = 10_000  # entries held behind keys' messages out; reading pauses beyond
MAX_KEY_CACHE = 100_000
PARK_RUN = 100  # parked entries per transaction
RETRY_S = 1.0
REDELIVER_ALL_HOLD_MS = 250  # uncounted messages of a redeliver-all wait this long before they go again


class KeyQuarantine:
    def __init__(self, sub: TrackedSubscription) -> None:
        self.sub = sub
        self._out: dict[str, int] = {}
        self.out_entries: dict[int, str] = {}  # entry out -> its key (empty: nothing to settle)
        self._waiting: dict[str, list[int]] = {}
        self._waiting_count = 0
        self._keys: dict[int, str | None] = {}
        self._to_park: list[tuple[int, str]] = []
        self._parking: asyncio.Task[None] | None = None

    # --- is it on? ---------------------------------------------------------------------
    @property
    def active(self) -> bool:
        sub = self.sub
        return kq.parks(sub.policy.on_key_failure, sub.sub_type, sub.durable)

    @property
    def full(self) -> bool:
        return self._waiting_count >= MAX_WAITING

    def poisoned_keys(self) -> dict[str, str]:
        """Poisoned key -> ORIGIN_MESSAGE_ID of its poisoned message."""
        props = self._props()
        return {name[len(POISON_ENTRY):]: self._origin(value) for name, value in props.items()
                if name.startswith(POISON_ENTRY)}

    # --- the dispatcher's question --------------------------------------------------------
    def admit(self, entry: Entry) -> bool:
        """True: dispatch `entry` now. False: it waits behind its key or is being parked."""
        eid = entry.position.entry_id
        key = self.key_of(entry)
        if key is None:
            return True
        out = self._out.get(key)
        if out is not None and out != eid and self.sub.cursor.is_acked(out):
            # acknowledged by a path that did not report it (an admin skip): forget it now, and
            # let its key's waiting entries go once this dispatch round is over (the round may
            # be walking the replay queue that they join)
            del self._out[key]
            self.out_entries.pop(out, None)
            asyncio.get_running_loop().call_soon(self._release, key)
            out = None
        state = self._state(key)
        returning = state is kq.KeyState.DRAINING and self._returning(entry)
        waiting = self._waiting.get(key)
        verdict = kq.gate(key, eid, state=state, returning=returning, out=out,
                          first_waiting=waiting[0] if waiting else None)
        if verdict is kq.Gate.ADMIT:
            self._out[key] = eid
            self.out_entries[eid] = key
            return True
        if verdict is kq.Gate.WAIT:
            lst = self._waiting.setdefault(key, [])
            i = bisect.bisect_left(lst, eid)
            if i == len(lst) or lst[i] != eid:
                lst.insert(i, eid)
                self._waiting_count += 1
            return False
        self._park([(eid, key)])
        return False

    def key_of(self, entry: Entry) -> str | None:
        """The entry's key as Key_Shared's sticky key: its ordering key, else its partition key."""
        eid = entry.position.entry_id
        if eid in self._keys:
            return self._keys[eid]
        try:
            meta = parse_entry_metadata(entry.data)
        except MalformedFrame:
            key = None
        else:
            if meta.HasField("ordering_key"):
                key = "ordering:" + meta.ordering_key.hex()
            elif meta.HasField("partition_key"):
                key = meta.partition_key
                if isinstance(key, bytes):  # not UTF-8: kept as text in the cursor's properties
                    key = "bytes:" + key.hex()
            else:
                key = None
        if len(self._keys) >= MAX_KEY_CACHE:
            self._keys.clear()
        self._keys[eid] = key
        return key

    def counted_on_redeliver_all(self, entry_ids: list[int]) -> list[int]:
        """A redeliver-all gave `entry_ids` back: queue again, uncounted, all but those
        that count a redelivery (returned; failure.key_quarantine says which)."""
        counted = kq.counted_on_redeliver_all(entry_ids)
        # held a moment: most of them were handled and their acknowledgement is on its way
        # (the official clients send them in groups every 100 ms); those come back only if not
        at = self.sub.topic.service.clock.now_ms() + REDELIVER_ALL_HOLD_MS
        for eid in entry_ids:
            if eid not in counted:
                self.sub.tracker.delay(eid, at)
        return counted

    # --- entries that left the subscription -------------------------------------------------
    def settled(self, entry_id: int) -> None:
        """`entry_id` was acknowledged (by its consumer, or moved by the broker)."""
        key = self.out_entries.pop(entry_id, None)
        if key is None:
            return
        if self._out.get(key) == entry_id:
            del self._out[key]
        self._release(key)

    def _release(self, key: str) -> None:
        """Nothing of `key` is out: the entries waiting behind it go on."""
        waiting = self._waiting.get(key)
        if not waiting or key in self._out:
            return
        cursor = self.sub.cursor
        while waiting and cursor.is_acked(waiting[0]):  # acknowledged while waiting (a clear-backlog)
            waiting.pop(0)
            self._waiting_count -= 1
        if not waiting:
            del self._waiting[key]
            return
        d = self.sub.dispatcher
        if POISON_ENTRY + key in self._props():
            # poisoned (or draining): every waiting entry is gated again, in order
            del self._waiting[key]
            self._waiting_count -= len(waiting)
            d.park(waiting)
        else:
            nxt = waiting.pop(0)
            self._waiting_count -= 1
            if not waiting:
                del self._waiting[key]
            self._out[key] = nxt  # reserved: nothing of its key overtakes it
            self.out_entries[nxt] = key
            d.park([nxt])
        d.schedule()

    def settled_through(self, upto: int) -> None:
        for eid in [e for e in self.out_entries if e <= upto]:
            self.settled(eid)

    def reset(self) -> None:
        """A seek: the dispatcher starts over from the new position."""
        self._out.clear()
        self.out_entries.clear()
        self._waiting.clear()
        self._waiting_count = 0
        self._to_park.clear()

    # --- poisoning, inside a dead-letter transaction --------------------------------------
    def record_poison(self, txn: Transaction, cursor: ManagedCursor, reason: str, dlq: TopicName,
                      moved: Iterable[tuple[Entry, int]]) -> None:
        """`moved`: (source entry, its entry id in `dlq`) dead-lettered for `reason` in `txn`.
        Only a dead letter in the subscription's own dead letter topic poisons (that is
        where the quarantine looks for its redrive or purge)."""
        if not kq.poisons(reason) or not self.active or dlq != self._dlq_name():
            return
        for entry, dlq_entry_id in moved:
            key = self.key_of(entry)
            if key is not None:
                txn.set_property(cursor, POISON_ENTRY + key, entry.position.entry_id)
                txn.set_property(cursor, POISON_DLQ + key, dlq_entry_id)
                log.info("key %r of %s/%s poisoned by entry %d: its later messages are parked",
                         key, self.sub.topic.name, self.sub.name, entry.position.entry_id)

    # --- internals ----------------------------------------------------------------------
    def _props(self) -> dict[str, int]:
        cursor = self.sub.cursor
        return cursor.properties if isinstance(cursor, ManagedCursor) else {}

    def _origin(self, entry_id: int) -> str:
        topic = self.sub.topic
        return origin_message_id(topic.ledger.ledger_id, entry_id, topic.name.partition_index, -1)

    def _state(self, key: str) -> kq.KeyState | None:
        props = self._props()
        dlq_entry = props.get(POISON_DLQ + key)
        if dlq_entry is None:
            return None
        dlq_name = self._dlq_name()
        handled = False
        if dlq_name is not None:
            try:
                dlq = self.sub.topic.service.persistent_topic(dlq_name, create=False)
            except LetterboxError:
                dlq = None
            hs = handled_subscription(dlq, create=False) if dlq is not None else None
            handled = hs is not None and (hs.cursor.is_acked(dlq_entry) or bool(hs.cursor.acked_indexes(dlq_entry)))
        state = kq.key_state(handled, dlq_name is not None and self.sub.topic.service.redrive_running(str(dlq_name)))
        if state is kq.KeyState.RELEASED:
            cursor = self.sub.cursor
            if isinstance(cursor, ManagedCursor):
                cursor.set_property(POISON_ENTRY + key, None)
                cursor.set_property(POISON_DLQ + key, None)
            log.info("key %r of %s/%s released", key, self.sub.topic.name, self.sub.name)
            return None
        return state

    def _dlq_name(self) -> TopicName | None:
        dl = self.sub.policy.dead_letter
        if dl is None:
            return None
        try:
            return dead_letter_topic_name(self.sub.topic.name, self.sub.name, dl.dead_letter_topic)
        except LetterboxError:
            return None

    def _returning(self, entry: Entry) -> bool:
        """Brought back from a dead letter topic into this topic (by a redrive)."""
        try:
            meta = parse_entry_metadata(entry.data)
        except MalformedFrame:
            return False
        props = {kv.key: kv.value for kv in meta.properties}
        return ORIGIN_MESSAGE_ID in props and props.get(REAL_TOPIC) == str(self.sub.topic.name)

    def _park(self, items: list[tuple[int, str]]) -> None:
        self._to_park.extend(items)
        if self._parking is None or self._parking.done():
            self._parking = asyncio.ensure_future(self._park_all())
            self.sub.topic.service.track(self._parking)

    async def _park_all(self) -> None:
        sub = self.sub
        while self._to_park:
            if sub.topic.subscriptions.get(sub.name) is not sub:  # deleted meanwhile
                self._to_park.clear()
                return
            key = self._to_park[0][1]
            n = 1
            while n < min(len(self._to_park), PARK_RUN) and self._to_park[n][1] == key:
                n += 1
            run = [eid for eid, _ in self._to_park[:n]]
            src = self._props().get(POISON_ENTRY + key)
            dl = sub.policy.dead_letter
            if src is None or dl is None or not self.active or self._state(key) is None:
                del self._to_park[:n]  # released meanwhile: they are dispatched as usual
                sub.dispatcher.park(run)
                sub.dispatcher.schedule()
                continue
            try:
                await move_to_dead_letter(sub, run, REASON_PARKED_BEHIND, dl.dead_letter_topic,
                                          dl.initial_subscription_name,
                                          stamps={PARKED_BEHIND: self._origin(src)})
            except Exception as exc:  # a storage failure is counted and logged by the move; try again
                if not isinstance(exc, StorageError):  # e.g. a terminated DLQ: counted and logged here
                    sub.topic.service.storage_failed("dead_letter", exc, f"{n} parked entries of "
                                                     f"{sub.topic.name}/{sub.name}")
                log.debug("parking %d entries of %s/%s failed: %s", n, sub.topic.name, sub.name, exc)
                await sub.topic.service.clock.sleep(RETRY_S)
                continue
            del self._to_park[:n]
