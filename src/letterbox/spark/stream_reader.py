# Streaming reads: `spark.readStream.format("letterbox")`.
#
# Offsets are {"<partition topic>": [ledger, entry]} (the next entry to read)
# and live in Spark's checkpoint, so a restarted query resumes exactly where
# its last committed micro-batch ended. `max_records_per_trigger` is applied
# through admission control (ReadMaxRows; an entry counts as one record, so a
# producer batch is never split). With a `subscription` option, a durable
# subscription follows the query: `commit()` acknowledges cumulatively up to
# the committed offset, so retention keeps what the query has not processed
# and the subscription's backlog is the query's lag. Spark calls commit()
# for a batch only when it plans the next one, so an idle query would leave
# its last batch unacknowledged; latestOffset(start) therefore also
# acknowledges up to `start` (Spark asks for offsets past `start` only after
# every batch ending at `start` has been committed to its commit log).
#
# Topics listed in `retry_tiers` ({topic: delay_ms}) are read only up to
# their *due prefix*: a message is due at publish_time + max(delay,
# DELAY_TIME property); the driver reads ahead in each tier topic with a
# Reader (`DueScanner`) and stops at the first message not yet due, so no
# message is handed to Spark before its delay has passed.
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pulsar
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from letterbox import message_properties as mp
from letterbox.spark.broker_io import SubscriptionCursor, last_position, open_client, position_of
from letterbox.spark.offsets import (
    EARLIEST,
    Position,
    advance,
    entries_between,
    offsets_from_json,
    offsets_to_json,
)
from letterbox.spark.options import ReadOptions
from letterbox.spark.planning import (
    PartitionTopic,
    TopicRange,
    check_source,
    read_partition,
    resolve,
    resolve_topics,
)

_RESOLVE_EVERY_S = 30.0


class DueScanner:
    """Reads ahead in one retry-tier partition to find how far its messages are due."""

    def __init__(self, client: pulsar.Client, topic: str, delay_ms: int, timeout_ms: int) -> None:
        self.client = client
        self.topic = topic
        self.delay_ms = delay_ms
        self.timeout_ms = timeout_ms
        self.reader: Any = None
        self.frontier = EARLIEST
        self.peeked: Any = None

    def due_end(self, start: Position, now_ms: int) -> Position:
        if self.reader is None or start > self.frontier or (start.is_earliest and not self.frontier.is_earliest):
            self._reopen(start)
        while True:
            if self.peeked is None:
                if not self.reader.has_message_available():
                    break
                self.peeked = self.reader.read_next(self.timeout_ms)
            delay = max(self.delay_ms, _int(self.peeked.properties().get(mp.DELAY_TIME)))
            if self.peeked.publish_timestamp() + delay > now_ms:
                break
            pos = position_of(self.peeked)
            self.frontier = Position(pos.ledger, pos.entry + 1)
            self.peeked = None
        return max(self.frontier, start)

    def _reopen(self, start: Position) -> None:
        self.close()
        mid = (
            pulsar.MessageId.earliest
            if start.is_earliest
            else pulsar.MessageId(-1, start.ledger, start.entry, -1)
        )
        self.reader = self.client.create_reader(self.topic, mid, start_message_id_inclusive=True)
        self.frontier = start
        self.peeked = None

    def close(self) -> None:
        if self.reader is not None:
            with contextlib.suppress(pulsar.PulsarException):
                self.reader.close()
            self.reader = None


def _int(v: str | None) -> int:
    try:
        return int(v) if v else 0
    except ValueError:
        return 0


class LetterboxStreamReader(DataSourceStreamReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._client: Any = None
        self._topics: list[PartitionTopic] = []
        self._resolved_at = 0.0
        self._cursors: dict[str, SubscriptionCursor] = {}
        self._scanners: dict[str, DueScanner] = {}
        self._acked: dict[str, Position] = {}

    # driver-side connections never travel to executors
    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"])  # type: ignore[misc]

    def _setup(self) -> list[PartitionTopic]:
        if self._client is None:
            check_source(self.opts)
            self._client = open_client(self.opts.service_url, auth=self.opts.auth)
        if time.monotonic() - self._resolved_at > _RESOLVE_EVERY_S or not self._topics:
            self._topics = resolve_topics(self.opts, self._client)
            self._resolved_at = time.monotonic()
            if self.opts.subscription:
                for pt in self._topics:
                    if pt.name not in self._cursors:
                        self._cursors[pt.name] = SubscriptionCursor(self._client, pt.name, self.opts.subscription)
        return self._topics

    def _end(self, pt: PartitionTopic, start: Position, now_ms: int) -> Position:
        delay = self.opts.retry_tiers.get(pt.parent)
        if delay is not None:
            scanner = self._scanners.get(pt.name)
            if scanner is None:
                scanner = self._scanners[pt.name] = DueScanner(self._client, pt.name, delay, self.opts.read_timeout_ms)
            return scanner.due_end(start, now_ms)
        cursor = self._cursors.get(pt.name)
        return max(start, cursor.end() if cursor is not None else last_position(self._client, pt.name))

    def initialOffset(self) -> dict[str, Any]:
        out: dict[str, Position] = {}
        for pt in self._setup():
            latest = self._cursors[pt.name].end() if pt.name in self._cursors else None
            out[pt.name] = resolve(self.opts.starting_offsets, pt, self._client, latest)
        return offsets_to_json(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        now_ms = int(time.time() * 1000)
        ends: dict[str, Position] = {}
        topics = self._setup()
        self._acknowledge(begin)
        for pt in topics:
            s = begin.get(pt.name, EARLIEST)
            ends[pt.name] = self._end(pt, s, now_ms)
        if isinstance(limit, ReadMaxRows):
            ends = _admit(begin, ends, limit.max_rows)
        merged = dict(begin)
        merged.update(ends)
        return offsets_to_json(merged)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        by_name = {pt.name: pt for pt in self._setup()}
        out: list[InputPartition] = []
        for name, e in sorted(stop.items()):
            s = begin.get(name, EARLIEST)
            if e > s and not e.is_earliest:
                pt = by_name.get(name) or PartitionTopic(name, name, -1)
                out.append(TopicRange(pt, s, e))
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicRange)
        yield from read_partition(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self.opts.subscription:
            self._setup()
            self._acknowledge(offsets_from_json(end))

    def _acknowledge(self, done: dict[str, Position]) -> None:
        for name, pos in done.items():
            cursor = self._cursors.get(name)
            if cursor is not None and pos > self._acked.get(name, EARLIEST):
                cursor.commit(pos)
                self._acked[name] = pos

    def stop(self) -> None:
        for s in self._scanners.values():
            s.close()
        for c in self._cursors.values():
            c.close()
        if self._client is not None:
            self._client.close()
        self._scanners.clear()
        self._cursors.clear()
        self._client = None


def _admit(begin: dict[str, Position], ends: dict[str, Position], budget: int) -> dict[str, Position]:
    """Share `budget` entries between partitions (water-filling: small backlogs are served whole)."""
    avail = {n: entries_between(begin.get(n, EARLIEST), e) for n, e in ends.items()}
    if sum(avail.values()) <= budget:
        return ends
    grant: dict[str, int] = {}
    left = budget
    pending = sorted((a, n) for n, a in avail.items() if a > 0)
    while pending:
        share = max(1, left // len(pending))
        a, n = pending.pop(0)
        g = min(a, share, left)
        grant[n] = g
        left -= g
    return {n: advance(begin.get(n, EARLIEST), e, grant.get(n, 0)) for n, e in ends.items()}
