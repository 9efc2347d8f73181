# Driver-side planning shared by the batch and the streaming reader: which
# partition topics a query reads, where each starts and ends, and how the
# ranges are cut into Spark input partitions (one per topic partition at
# least, more when min_partitions asks for it).
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pulsar
from pyspark.sql.datasource import InputPartition

from letterbox.spark.broker_io import (
    last_position,
    open_client,
    partition_topics,
    pattern_topics,
    probe_broker,
    read_range,
    topic_exists,
)
from letterbox.spark.offsets import EARLIEST, Position
from letterbox.spark.options import OffsetSpec, ReadOptions, SparkOptionError
from letterbox.spark.schema import BatchBuilder, reads_dead_letters
from letterbox.topic_name import TopicName


@dataclass(frozen=True)
class PartitionTopic:
    parent: str  # the topic as named by the user
    name: str  # the partition topic (== parent when not partitioned)
    index: int  # partition index, -1 when not partitioned


def check_source(opts: ReadOptions) -> None:
    """Before any client call: the broker answers (in seconds, naming the URL), and the named
    topics exist unless create_if_missing (checked through the admin API, so only when its
    address is known: admin_url, or an http(s) service_url)."""
    probe_broker(opts.service_url)
    admin = _admin_address(opts)
    if opts.create_if_missing or admin is None:
        return
    for t in opts.topics:
        if not topic_exists(admin, t, opts.auth):
            raise SparkOptionError(f"topic {t} does not exist; set the option create_if_missing=true to read "
                                   "it anyway (as empty until something is published)")


def _admin_address(opts: ReadOptions) -> str | None:
    return opts.admin_url or (opts.service_url if opts.service_url.startswith("http") else None)


def resolve_topics(opts: ReadOptions, client: pulsar.Client) -> list[PartitionTopic]:
    topics = list(opts.topics)
    if opts.topics_pattern is not None:
        admin = _admin_address(opts)
        if admin is None:
            raise SparkOptionError("option topics_pattern needs admin_url (the broker's admin HTTP address)")
        topics = pattern_topics(admin, opts.topics_pattern, opts.auth)
    topics += [t for t in opts.retry_tiers if t not in topics]
    out: list[PartitionTopic] = []
    for t in topics:
        for p in partition_topics(client, t):
            out.append(PartitionTopic(t, p, TopicName.parse(p).partition_index))
    return out


def resolve(spec: OffsetSpec, pt: PartitionTopic, client: pulsar.Client, latest: Position | None) -> Position:
    if isinstance(spec, dict):
        per = spec.get(pt.parent, spec.get(pt.name))
        value: Position | str = "earliest" if per is None else per.get(pt.index, "earliest")
    else:
        value = spec
    if value == "earliest":
        return EARLIEST
    if value == "latest":
        return latest if latest is not None else last_position(client, pt.name)
    assert isinstance(value, Position)
    return value


class TopicRange(InputPartition):
    """Entries [start, end) of one partition topic, read by one Spark task."""

    def __init__(self, pt: PartitionTopic, start: Position, end: Position) -> None:
        super().__init__((pt.name, tuple(start), tuple(end)))
        self.pt = pt
        self.start = start
        self.end = end


def split_ranges(ranges: list[TopicRange], min_partitions: int) -> list[TopicRange]:
    """Cut the largest ranges in halves until there are at least min_partitions."""
    out = list(ranges)
    while len(out) < min_partitions:
        best = max(out, key=_size, default=None)
        if best is None or _size(best) < 2:
            break
        lo = best.start if not best.start.is_earliest else Position(best.end.ledger, 0)
        mid = Position(lo.ledger, lo.entry + _size(best) // 2)
        i = out.index(best)
        out[i : i + 1] = [TopicRange(best.pt, best.start, mid), TopicRange(best.pt, mid, best.end)]
    return out


def _size(r: TopicRange) -> int:
    if r.end.is_earliest or r.end <= r.start:
        return 0
    if r.start.is_earliest:
        return r.end.entry
    return r.end.entry - r.start.entry if r.start.ledger == r.end.ledger else 0


RANGES_DDL = (
    "topic string, partition int, partition_topic string, "
    "start_ledger long, start_entry long, end_ledger long, end_entry long"
)


def read_partition(opts: ReadOptions, part: TopicRange) -> Iterator[Any]:
    """Arrow record batches of one TopicRange (runs in a Spark executor); with emit=ranges, the range itself."""
    if opts.emit == "ranges":
        yield (part.pt.parent, part.pt.index, part.pt.name, *part.start, *part.end)
        return
    client = open_client(opts.service_url, auth=opts.auth)
    try:
        builder = BatchBuilder(part.pt.parent, part.pt.index, attempts=reads_dead_letters(opts.topics))
        add, size, n = builder.add, opts.arrow_batch_size, 0
        for msg, mid in read_range(client, part.pt.name, part.start, part.end, opts.read_timeout_ms, opts.fail_on_data_loss):
            add(msg, mid)
            n += 1
            if n == size:
                yield builder.build()
                n = 0
        if n:
            yield builder.build()
    finally:
        client.close()
