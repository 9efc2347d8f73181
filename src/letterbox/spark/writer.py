# Batch and streaming writes: `df.write.format("letterbox")` and
# `df.writeStream.format("letterbox")`. Columns: `value` (binary or string,
# required), optional `key`, `properties` (map<string,string>),
# `event_time` (timestamp) and `topic` (per-row destination, else the
# `topic` option).
#
# Idempotence: every task publishes through producers named
# `<name>-<task partition>` with sequence ids derived from the input:
#   batch:     name = producer_name option (default: a name unique to this
#              write job), sequence id = row index in the task's partition;
#   streaming: name = producer_name option (required), sequence id =
#              micro-batch id << 32 | row index.
# A retried task re-sends the same (name, sequence id) pairs, which the
# broker's deduplication drops. This needs deduplication enabled on the
# broker and an input whose partitions hold the same rows in the same order
# when recomputed (true for letterbox, Kafka and file sources).
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from letterbox.spark.broker_io import open_client
from letterbox.spark.options import SparkOptionError, WriteOptions, full_topic_name
from letterbox.spark.publisher import IdempotentPublisher

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark on every micro-batch job


@dataclass
class PublishedMessages(WriterCommitMessage):
    partition: int
    sent: int
    stored: int
    duplicates: int


def check_schema(schema: StructType, opts: WriteOptions) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "value" not in names:
        raise SparkOptionError("the DataFrame written to letterbox needs a 'value' column (binary or string)")
    if not isinstance(names["value"], BinaryType | StringType):
        raise SparkOptionError(f"column 'value' must be binary or string, not {names['value'].simpleString()}")
    if opts.topic is None and "topic" not in names:
        raise SparkOptionError("give the topic option or a 'topic' column")


def _task_partition() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def publish_rows(
    opts: WriteOptions, producer_name: str, batches: Iterator[pa.RecordBatch], seq_base: int
) -> PublishedMessages:
    part = _task_partition()
    client = open_client(opts.service_url, auth=opts.auth)
    pub = IdempotentPublisher(client, f"{producer_name}-{part}", opts.send_timeout_ms)
    topics_seen: dict[str, str] = {}
    index = 0
    try:
        for batch in batches:
            cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
            values = cols["value"]
            keys = cols.get("key")
            props = cols.get("properties")
            events = cols.get("event_time")
            topics = cols.get("topic")
            for j, value in enumerate(values):
                t = topics[j] if topics is not None and topics[j] else opts.topic
                if t is None:
                    raise SparkOptionError(f"row {index} has no topic and the topic option is not set")
                full = topics_seen.get(t) or topics_seen.setdefault(t, full_topic_name(t))
                body = value.encode() if isinstance(value, str) else (value or b"")
                p = props[j] if props is not None else None
                ev = events[j] if events is not None else None
                pub.send(
                    full,
                    body,
                    seq_base + index,
                    key=keys[j] if keys is not None else None,
                    properties=dict(p) if p else None,
                    event_time_ms=int(ev.timestamp() * 1000) if isinstance(ev, datetime) else None,
                    index=index,
                )
                index += 1
        pub.flush()
        return PublishedMessages(part, pub.sent, pub.stored, pub.duplicates)
    finally:
        pub.close()
        client.close()


class LetterboxBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(schema, opts)
        self.opts = opts
        self.producer_name = opts.producer_name or f"spark-write-{uuid.uuid4().hex[:12]}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishedMessages:
        return publish_rows(self.opts, self.producer_name, iterator, 0)


class LetterboxStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(schema, opts)
        if opts.producer_name is None:
            raise SparkOptionError(
                "option producer_name is required for streaming writes: a name stable across restarts "
                "of this query, so that re-run micro-batches are deduplicated"
            )
        self.opts = opts
        self.producer_name = opts.producer_name

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishedMessages:
        ctx = TaskContext.get()
        raw = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if raw is None:
            raise RuntimeError("letterbox stream writer: Spark did not say which micro-batch this is")
        return publish_rows(self.opts, self.producer_name, iterator, int(raw) << 32)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None


