# Topic compaction (Pulsar's two-phase compactor, letterbox size): the broker-side runs,
# their status, and the compactionThreshold monitor.
#
# A run over a topic, horizon H = the last confirmed entry when it starts:
#   phase 1  reads the view in force (up to its horizon H0) then the ledger's entries
#            H0+1..H, chunk by chunk, and keeps the latest (entry, batch index) per key; a
#            message with an empty / null payload (a tombstone) is kept as its key's latest
#            when it is an entry of its own -- compacted readers receive the deletion --
#            and removes its key when it is inside a batch; a message without a key is left
#            out (all as Apache Pulsar 4.0's compactor does);
#   phase 2  reads the same sources again and writes a copy of every entry still holding
#            a latest value into a new generation, `compaction_chunk_entries` rows per
#            storage transaction; then one submission makes the new generation the view in
#            force (storage/compaction.py). The run's durable "__compaction" subscription
#            (as Pulsar's) then acknowledges through H: entries after the horizon are
#            retained until a compaction has taken them in.
# Invariants: at most one run per topic (a second trigger is refused, 409 over HTTP); a
# crash at any point leaves the old view or the new one, whole; the status (NOT_RUN,
# RUNNING, SUCCESS, ERROR + lastError, Pulsar's LongRunningProcessStatus) is in memory.
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from letterbox.broker.compaction.compaction_entries import (
    NOT_BATCHED,
    compacted_copy,
    keyed_messages,
)
from letterbox.clock import Periodic
from letterbox.protocol.framing import MalformedFrame
from letterbox.storage.compaction import CompactedHorizon, CompactedViews
from letterbox.storage.entry import Entry

if TYPE_CHECKING:
    from letterbox.broker.compaction.compacted_topic import CompactedTopic, CompactionBroker

log = logging.getLogger(__name__)

COMPACTION_SUBSCRIPTION = "__compaction"
THRESHOLD_POLICY = "compaction_threshold"  # Pulsar's Policies field, bytes


class CompactionInProgress(Exception):
    """A compaction of the topic is already running."""


class Compactor:
    def __init__(self, service: CompactionBroker) -> None:
        self.service = service
        self.views = CompactedViews(service.store)
        self._status: dict[str, tuple[str, str | None]] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._monitor: Periodic | None = None

    # ---- status and triggers ----

    def status(self, topic: str) -> dict[str, Any]:
        state, error = self._status.get(topic, ("NOT_RUN", None))
        return {"status": state, "lastError": error or ""}

    def running(self, topic: str) -> bool:
        return topic in self._running

    def trigger(self, topic: CompactedTopic) -> None:
        """Start a run in the background; CompactionInProgress if one runs already."""
        name = str(topic.name)
        if name in self._running:
            raise CompactionInProgress(f"Compaction already in progress for topic {name}")
        self._status[name] = ("RUNNING", None)
        task = asyncio.get_running_loop().create_task(self._run(topic))
        self._running[name] = task

    async def _run(self, topic: CompactedTopic) -> None:
        name = str(topic.name)
        try:
            view = await self.compact(topic)
            log.info("compacted %s through entry %d: %d entries in the view", name, view.horizon, view.entries)
            self._status[name] = ("SUCCESS", None)
        except asyncio.CancelledError:
            self._status[name] = ("ERROR", "compaction cancelled (broker stopping or topic deleted)")
            raise
        except Exception as exc:
            log.warning("compaction of %s failed: %s", name, exc)
            self._status[name] = ("ERROR", f"{type(exc).__name__}: {exc}")
        finally:
            self._running.pop(name, None)

    async def topic_deleted(self, topic: str, ledger_id: int) -> None:
        """The topic is being deleted: stop its run, forget its status and its view pointer
        (the view's rows go with the ledger)."""
        task = self._running.get(topic)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._status.pop(topic, None)
        await self.views.forget(ledger_id)

    # ---- the run ----

    async def compact(self, topic: CompactedTopic) -> CompactedHorizon:
        ledger = topic.ledger
        lid = ledger.ledger_id
        chunk = self.service.config.compaction_chunk_entries
        # the subscription holds what is not compacted yet against retention from now on
        sub = topic.subscription_for(COMPACTION_SUBSCRIPTION, True, "earliest", None)
        await self.views.discard_unfinished(lid)
        old = self.views.horizon(lid)
        horizon = ledger.last_confirmed.entry_id
        latest: dict[str, tuple[int, int]] = {}
        async for entries in self._sources(topic, old, horizon, chunk):
            for entry in entries:
                for msg in _messages(entry, name=str(topic.name)):
                    if msg.key is None:
                        continue
                    if msg.is_null and msg.index != NOT_BATCHED:
                        latest.pop(msg.key, None)
                    else:
                        latest[msg.key] = (entry.entry_id, msg.index)
        keep: dict[int, set[int]] = {}
        for eid, index in latest.values():
            keep.setdefault(eid, set()).add(index)
        generation = old.generation + 1 if old is not None else 1
        count = size = 0
        rows: list[Entry] = []
        async for entries in self._sources(topic, old, horizon, chunk):
            for entry in entries:
                wanted = keep.get(entry.entry_id)
                copy = compacted_copy(entry, wanted) if wanted else None
                if copy is not None:
                    rows.append(copy)
            if len(rows) >= chunk:
                await self.views.write_chunk(lid, generation, rows)
                count, size = count + len(rows), size + sum(len(r.data) for r in rows)
                rows = []
        await self.views.write_chunk(lid, generation, rows)
        count, size = count + len(rows), size + sum(len(r.data) for r in rows)
        view = CompactedHorizon(generation, horizon, count, size, self.service.clock.now_ms())
        await self.views.switch(lid, view)
        if horizon > sub.cursor.mark_delete.entry_id:
            sub.cursor.ack_cumulative(horizon)
            topic.on_cursor_moved()
        return view

    async def _sources(
        self, topic: CompactedTopic, old: CompactedHorizon | None, horizon: int, chunk: int
    ) -> AsyncIterator[list[Entry]]:
        """The view in force, then the ledger after its horizon up to `horizon`, in chunks."""
        ledger = topic.ledger
        lid = ledger.ledger_id
        start = 0
        if old is not None:
            while True:
                part = self.views.read(lid, old, start, chunk)
                if not part:
                    break
                yield part
                await asyncio.sleep(0)
                start = part[-1].entry_id + 1
            start = old.horizon + 1
        start = max(start, ledger.first_position.entry_id)
        while start <= horizon:
            part = [e for e in ledger.read_entries(start, min(chunk, horizon - start + 1)) if e.entry_id <= horizon]
            if not part:
                break
            yield part
            await asyncio.sleep(0)  # a chunk at a time: producers and consumers go on
            start = part[-1].entry_id + 1

    # ---- compactionThreshold ----

    def start(self) -> None:
        self._monitor = Periodic(self.service.clock, self.service.config.compaction_monitor_interval_seconds,
                                 self._check_thresholds).start()

    async def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            self._monitor = None
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _check_thresholds(self) -> None:
        """Compact every loaded topic whose backlog after the compaction horizon passed its
        namespace's compactionThreshold (bytes; 0 or unset: off)."""
        try:
            for topic in self.service.loaded_persistent_topics():
                if self.running(str(topic.name)):
                    continue
                threshold = self.threshold(topic.name.namespace_name)
                if threshold <= 0:
                    continue
                view = self.views.horizon(topic.ledger.ledger_id)
                after = view.horizon if view is not None else -1
                if self.views.bytes_after(topic.ledger.ledger_id, after) >= threshold:
                    self.trigger(topic)
        except Exception:
            log.exception("compaction threshold check failed")

    def threshold(self, namespace: str) -> int:
        doc = self.service.namespace_policies.document(namespace) or {}
        value = doc.get(THRESHOLD_POLICY)
        return int(value) if isinstance(value, int) else 0


def _messages(entry: Entry, *, name: str) -> list[Any]:
    try:
        return list(keyed_messages(entry.data))
    except (MalformedFrame, ValueError) as exc:  # stored before validation: leave it out
        log.warning("compaction of %s leaves out entry %d, unreadable: %s", name, entry.entry_id, exc)
        return []
