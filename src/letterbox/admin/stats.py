# Topic statistics in the shape of Pulsar's TopicStats / PartitionedTopicStats /
# PersistentTopicInternalStats. Counters come from the broker objects; rates
# are computed by StatsTracker from counter samples taken once a second over a
# sliding one-minute window (kept only when a counter changes, so 20,000 idle
# topics cost neither memory nor time per second). Out counters live on consumers, which disappear
# when they disconnect: the tracker remembers every consumer it has seen and
# folds a departed consumer's final count into its subscription's total.
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from letterbox.admin import stats_fields
from letterbox.broker import (
    ACCESS_MODE_NAMES,
    SUB_TYPE_NAMES,
    NonPersistentTopic,
    PersistentTopic,
    Topic,
)

if TYPE_CHECKING:
    from letterbox.broker import BrokerService, Consumer

WINDOW_SECONDS = 60.0
# internal stats of a cursor with partly acknowledged batches: "ledger:entry" -> acknowledged
# indexes (letterbox's own field, absent otherwise; `letterbox migrate` reads it)
BATCH_ACKED = "letterboxBatchAckedIndexes"
Key = tuple[str, ...]


class StatsTracker:
    """Counter samples for rates. Samples are kept only when a counter changes
    (a counter is constant between two samples), so an idle topic costs one or
    two samples per counter, not one a second; the value at the window's start
    is the last sample at or before it. Topics with no producer, no consumer
    and no new message since the last sample are skipped by sample()."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self._samples: dict[Key, deque[tuple[float, int]]] = {}
        self._keys: dict[str, set[Key]] = {}  # topic -> its sampled keys
        self._idle: dict[str, int] = {}  # idle topic -> msg_in when it was last sampled
        self._tick = 0.0  # time of the last sample()
        self._seen: dict[Key, dict[int, Consumer]] = {}  # (topic, sub) -> consumers seen
        self._departed: dict[Key, int] = {}  # (topic, sub) -> msg_out of departed consumers

    # --- counters ------------------------------------------------------------
    def sub_msg_out(self, topic: str, sub_name: str, consumers: list[Consumer]) -> int:
        key = (topic, sub_name)
        seen = self._seen.setdefault(key, {})
        current = {id(c): c for c in consumers}
        for cid, c in list(seen.items()):
            if cid not in current:
                self._departed[key] = self._departed.get(key, 0) + c.msg_out
                del seen[cid]
        seen.update(current)
        return self._departed.get(key, 0) + sum(c.msg_out for c in consumers)

    def topic_counters(self, tname: str, topic: Topic) -> dict[Key, int]:
        """Every counter a rate is reported for on one topic, keyed by what it counts."""
        out: dict[Key, int] = {("in", tname): topic.msg_in, ("bin", tname): topic.bytes_in}
        total_out = 0
        for sname, sub in _subscriptions(topic).items():
            n = self.sub_msg_out(tname, sname, sub.consumers)
            total_out += n
            out[("out", tname, sname)] = n
            out[("redeliver", tname, sname)] = getattr(sub, "msg_redelivered", 0)
            out[("expired", tname, sname)] = getattr(sub, "msg_expired", 0)
            for c in sub.consumers:
                out[("cout", tname, sname, str(id(c)))] = c.msg_out
        out[("out", tname)] = total_out
        if isinstance(topic, PersistentTopic):  # entries written, broker-side appends too (storage write rate)
            out[("entries", tname)] = topic.ledger.next_entry_id
        for p in topic.producers:
            out[("pin", tname, str(id(p)))] = p.msg_in
            out[("pbin", tname, str(id(p)))] = p.bytes_in
        return out

    def counters(self) -> dict[Key, int]:
        """Every counter of every loaded topic."""
        out: dict[Key, int] = {}
        for tname, topic in list(self.service.topics.items()):
            out.update(self.topic_counters(tname, topic))
        return out

    def _is_idle(self, tname: str, topic: Topic) -> bool:
        if topic.producers or any(s.consumers for s in _subscriptions(topic).values()):
            return False
        return self._idle.get(tname) == topic.msg_in

    def sample(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._sample_topics(list(self.service.topics.items()), now)
        self._finish_sample(now)

    async def sample_sliced(self, slice_size: int = 500) -> None:
        """sample(), yielding to the event loop every slice_size topics."""
        now = self._tick = time.monotonic()
        items = list(self.service.topics.items())
        for i in range(0, len(items), slice_size):
            self._sample_topics(items[i:i + slice_size], now)
            await asyncio.sleep(0)
        self._finish_sample(now)

    def _sample_topics(self, items: list[tuple[str, Topic]], now: float) -> None:
        start = now - WINDOW_SECONDS
        for tname, topic in items:
            if self._is_idle(tname, topic):
                continue
            values = self.topic_counters(tname, topic)
            for key, value in values.items():
                dq = self._samples.get(key)
                if dq is None:
                    dq = self._samples[key] = deque()
                if not dq or dq[-1][1] != value:
                    dq.append((now, value))
                while len(dq) > 1 and dq[1][0] <= start:
                    dq.popleft()
            for key in self._keys.get(tname, set()) - values.keys():
                del self._samples[key]
            self._keys[tname] = set(values)
            if topic.producers or any(s.consumers for s in _subscriptions(topic).values()):
                self._idle.pop(tname, None)
            else:
                self._idle[tname] = topic.msg_in

    def _finish_sample(self, now: float) -> None:
        self._tick = now
        topics = self.service.topics
        for tname in [t for t in self._keys if t not in topics]:
            for key in self._keys.pop(tname):
                self._samples.pop(key, None)
            self._idle.pop(tname, None)

    def rate(self, *key: str) -> float:
        """Per second over the window: (newest value - value at the window's
        start) / (last sample time - max(window start, first sample))."""
        dq = self._samples.get(key)
        if dq is None or len(dq) < 2:  # one sample: no change within the window
            return 0.0
        start = self._tick - WINDOW_SECONDS
        while len(dq) > 1 and dq[1][0] <= start:  # an idle topic's samples are not trimmed by sample()
            dq.popleft()
        t0 = max(dq[0][0], start)
        if self._tick <= t0:
            return 0.0
        return max(0.0, (dq[-1][1] - dq[0][1]) / (self._tick - t0))

    # --- TopicStats ------------------------------------------------------------
    def topic_stats(self, topic: Topic) -> dict[str, Any]:
        tname = str(topic.name)
        avg = topic.bytes_in / topic.msg_in if topic.msg_in else 0.0
        subs: dict[str, Any] = {}
        for sname, sub in _subscriptions(topic).items():
            subs[sname] = self._subscription_stats(tname, sname, sub, avg)
        msg_out = sum(int(s["msgOutCounter"]) for s in subs.values())
        rate_in = self.rate("in", tname)
        storage = topic.ledger.size_bytes() if isinstance(topic, PersistentTopic) else 0
        return {
            **stats_fields.fresh(stats_fields.TOPIC),
            "msgRateIn": rate_in,
            "msgThroughputIn": self.rate("bin", tname),
            "msgRateOut": self.rate("out", tname),
            "msgThroughputOut": self.rate("out", tname) * avg,
            "bytesInCounter": topic.bytes_in,
            "msgInCounter": topic.msg_in,
            "bytesOutCounter": int(msg_out * avg),
            "msgOutCounter": msg_out,
            "averageMsgSize": avg,
            "msgChunkPublished": False,
            "storageSize": storage,
            "backlogSize": _backlog_size(topic),
            "offloadedStorageSize": 0,
            "publishers": [self._publisher_stats(tname, p) for p in topic.producers],
            "waitingPublishers": 0,
            "subscriptions": subs,
            "replication": {},
            "deduplicationStatus": "Enabled" if self.service.namespace_policies.deduplication(
                topic.name.namespace_name) else "Disabled",
            "nonContiguousDeletedMessagesRanges": sum(
                int(s.get("nonContiguousDeletedMessagesRanges", 0)) for s in subs.values()
            ),
        }

    def _publisher_stats(self, tname: str, p: Any) -> dict[str, Any]:
        pid = str(id(p))
        return {
            **stats_fields.fresh(stats_fields.PUBLISHER),
            "clientVersion": p.cnx.client_version,
            "accessMode": ACCESS_MODE_NAMES.get(p.access_mode, "Shared"),
            "msgRateIn": self.rate("pin", tname, pid),
            "msgThroughputIn": self.rate("pbin", tname, pid),
            "averageMsgSize": p.bytes_in / p.msg_in if p.msg_in else 0.0,
            "producerId": p.producer_id,
            "producerName": p.name,
            "address": p.cnx.remote,
            "metadata": dict(p.metadata),
        }

    def _subscription_stats(self, tname: str, sname: str, sub: Any, avg: float) -> dict[str, Any]:
        consumers: list[Consumer] = list(sub.consumers)
        msg_out = self.sub_msg_out(tname, sname, consumers)
        rate_out = self.rate("out", tname, sname)
        durable = bool(getattr(sub, "durable", False))
        backlog = sub.backlog() if hasattr(sub, "backlog") else 0
        delayed = sub.delayed_count() if hasattr(sub, "delayed_count") else 0
        ranges = getattr(sub.cursor, "individually_acked_ranges", None) if hasattr(sub, "cursor") else None
        dispatcher = getattr(sub, "dispatcher", None)
        active = dispatcher.active_name() if dispatcher is not None else None
        named = {"activeConsumerName": active} if active is not None else {}  # Pulsar omits a null one
        return {
            **stats_fields.fresh(stats_fields.SUBSCRIPTION),
            **named,
            "msgRateOut": rate_out,
            "msgThroughputOut": rate_out * avg,
            "bytesOutCounter": int(msg_out * avg),
            "msgOutCounter": msg_out,
            "msgRateRedeliver": self.rate("redeliver", tname, sname),
            "msgBacklog": backlog,
            "backlogSize": int(backlog * avg),
            "msgBacklogNoDelayed": max(0, backlog - delayed),
            "blockedSubscriptionOnUnackedMsgs": bool(getattr(sub, "blocked_on_unacked", False)),
            "msgDelayed": delayed,
            "unackedMessages": sum(sum(c.pending.values()) for c in consumers),
            "type": SUB_TYPE_NAMES.get(sub.sub_type if sub.sub_type is not None else 0, "Exclusive"),
            "msgRateExpired": self.rate("expired", tname, sname),
            "totalMsgExpired": getattr(sub, "msg_expired", 0),
            "consumers": [self._consumer_stats(tname, sname, c, avg) for c in consumers],
            "isDurable": durable,
            "durable": durable,
            "isReplicated": False,
            "nonContiguousDeletedMessagesRanges": len(ranges()) if callable(ranges) else 0,
            # ordered quarantine: poisoned key -> ORIGIN_MESSAGE_ID of its poisoned message
            "letterboxPoisonedKeys": sub.quarantine.poisoned_keys() if hasattr(sub, "quarantine") else {},
        }

    def _consumer_stats(self, tname: str, sname: str, c: Consumer, avg: float) -> dict[str, Any]:
        rate = self.rate("cout", tname, sname, str(id(c)))
        return {
            **stats_fields.fresh(stats_fields.CONSUMER),
            "clientVersion": c.cnx.client_version,
            "msgRateOut": rate,
            "msgThroughputOut": rate * avg,
            "bytesOutCounter": int(c.msg_out * avg),
            "msgOutCounter": c.msg_out,
            "msgRateRedeliver": 0.0,
            "consumerName": c.name,
            "availablePermits": c.permits,
            "unackedMessages": c.pending.total,
            "blockedConsumerOnUnackedMsgs": c.blocked_on_unacked,
            "address": c.cnx.remote,
            "metadata": dict(c.metadata),
        }

    # --- PartitionedTopicStats -------------------------------------------------
    def partitioned_stats(self, partitions: dict[str, dict[str, Any]], per_partition: bool) -> dict[str, Any]:
        total: dict[str, Any] = {}
        for stats in partitions.values():
            for field, value in stats.items():
                if field in PER_TOPIC_ONLY:
                    continue
                if field == "publishers":
                    total.setdefault(field, []).extend(value)
                elif field == "subscriptions":
                    merged = total.setdefault(field, {})
                    for sname, sub in value.items():
                        merged[sname] = _merge_sub(merged.get(sname), sub)
                elif isinstance(value, bool) or not isinstance(value, int | float):
                    total.setdefault(field, value)
                else:
                    total[field] = total.get(field, 0) + value
        total.setdefault("publishers", [])
        total.setdefault("subscriptions", {})
        msg_in = total.get("msgInCounter", 0)
        total["averageMsgSize"] = total.get("bytesInCounter", 0) / msg_in if msg_in else 0.0
        total["metadata"] = {"partitions": len(partitions), "deleted": False}
        total["partitions"] = partitions if per_partition else {}
        return total


# fields of a topic's stats that Pulsar's PartitionedTopicStats does not sum up or carry
PER_TOPIC_ONLY = frozenset({"deduplicationStatus"})


def empty_topic_stats() -> dict[str, Any]:
    """Stats of a partition that was never created (nothing published, no subscriptions)."""
    return {
        "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
        "bytesInCounter": 0, "msgInCounter": 0, "bytesOutCounter": 0, "msgOutCounter": 0,
        "averageMsgSize": 0.0, "msgChunkPublished": False, "storageSize": 0, "backlogSize": 0,
        "offloadedStorageSize": 0, "publishers": [], "waitingPublishers": 0, "subscriptions": {},
        "replication": {}, "deduplicationStatus": "Disabled", "nonContiguousDeletedMessagesRanges": 0,
    }


def _merge_sub(into: dict[str, Any] | None, sub: dict[str, Any]) -> dict[str, Any]:
    if into is None:
        out = dict(sub)
        out["consumers"] = list(sub["consumers"])
        return out
    for field, value in sub.items():
        if field == "consumers":
            into["consumers"] = into["consumers"] + list(value)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            if into.get(field) is None:
                into[field] = value
        else:
            into[field] = into.get(field, 0) + value
    return into


def _subscriptions(topic: Topic) -> dict[str, Any]:
    if isinstance(topic, PersistentTopic | NonPersistentTopic):
        return dict(topic.subscriptions)
    return {}


def _backlog_size(topic: Topic) -> int:
    """Estimated bytes not yet acknowledged by the slowest durable subscription."""
    if not isinstance(topic, PersistentTopic):
        return 0
    ledger = topic.ledger
    stored = ledger.last_confirmed.entry_id - ledger.first_position.entry_id + 1
    durable = [s for s in topic.subscriptions.values() if s.durable]
    if stored <= 0 or not durable:
        return 0
    slowest = min(s.cursor.mark_delete.entry_id for s in durable)
    pending = ledger.last_confirmed.entry_id - max(slowest, ledger.first_position.entry_id - 1)
    return int(ledger.size_bytes() * max(0, pending) / stored)


def internal_stats(topic: PersistentTopic) -> dict[str, Any]:
    ledger = topic.ledger
    lid = ledger.ledger_id
    first, lc = ledger.first_position.entry_id, ledger.last_confirmed.entry_id
    entries = max(0, lc - first + 1)
    cursors: dict[str, Any] = {}
    for name, sub in topic.subscriptions.items():
        md = sub.cursor.mark_delete.entry_id
        ranges_fn = getattr(sub.cursor, "individually_acked_ranges", None)
        ranges: list[tuple[int, int]] = ranges_fn() if callable(ranges_fn) else []
        cursors[name] = {
            "markDeletePosition": f"{lid}:{md}",
            "readPosition": f"{lid}:{sub.read_position}",
            "waitingReadOp": False,
            "pendingReadOps": 0,
            "messagesConsumedCounter": ledger.next_entry_id - sub.backlog(),
            "cursorLedger": -1,
            "cursorLedgerLastEntry": -1,
            "individuallyDeletedMessages": "["
            + ", ".join(f"({lid}:{s - 1}..{lid}:{e}]" for s, e in ranges)
            + "]",
            "lastLedgerSwitchTimestamp": "",
            "state": "Open",
            "active": bool(sub.consumers),
            "numberOfEntriesSinceFirstNotAckedMessage": max(0, sub.read_position - md),
            "totalNonContiguousDeletedMessagesRange": len(ranges),
            "properties": dict(getattr(sub.cursor, "properties", {})),
            **stats_fields.fresh(stats_fields.CURSOR),
        }
        batches_fn = getattr(sub.cursor, "batch_acked_indexes", None)
        if callable(batches_fn) and (batches := batches_fn()):  # letterbox's own: batch-index acks
            cursors[name][BATCH_ACKED] = {f"{lid}:{e}": acked for e, acked in batches.items()}
    return {
        **stats_fields.fresh(stats_fields.INTERNAL),
        "entriesAddedCounter": ledger.next_entry_id,
        "numberOfEntries": entries,
        "totalSize": ledger.size_bytes(),
        "currentLedgerEntries": entries,
        "currentLedgerSize": ledger.size_bytes(),
        "lastLedgerCreatedTimestamp": "",
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": max(0, ledger.next_entry_id - lc - 1),
        "lastConfirmedEntry": f"{lid}:{lc}",
        "state": "LedgerOpened",
        "ledgers": [
            {"ledgerId": lid, "entries": entries, "size": ledger.size_bytes(), "offloaded": False,
             "underReplicated": False}
        ],
        "cursors": cursors,
    }
