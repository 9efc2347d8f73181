# The row schema of the `letterbox` data source and the conversion of
# official-client messages into Arrow record batches of that schema.
#
# Columns (in order): key, value, properties, topic, partition, message_id,
# publish_time, event_time, producer_name, sequence_id. `topic` is the topic
# as the user names it (the partitioned parent for a partition), `partition`
# its index (-1 when not partitioned), `message_id` is written
# `ledger:entry:partition:batchIndex` like ORIGIN_MESSAGE_ID, `event_time` is
# null when the producer set none. `sequence_id` is null: the official Python
# client does not expose a received message's sequence id.
# Reading dead letter topics only (every topic named ends in -DLQ; not with
# topics_pattern), an 11th column `delivery_attempts` holds each dead letter's
# attempt log (its DELIVERY_ATTEMPTS property: delivered_at, ended_at,
# consumer, address, ending, reason; null when it has none).
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from letterbox.failure import TopicRole, topic_role
from letterbox.failure.attempts import parse_attempts_property
from letterbox.message_properties import DELIVERY_ATTEMPTS, origin_message_id

COLUMNS = (
    "key",
    "value",
    "properties",
    "topic",
    "partition",
    "message_id",
    "publish_time",
    "event_time",
    "producer_name",
    "sequence_id",
)

SCHEMA = StructType(
    [
        StructField("key", StringType(), True),
        StructField("value", BinaryType(), True),
        StructField("properties", MapType(StringType(), StringType(), True), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("message_id", StringType(), True),
        StructField("publish_time", TimestampType(), True),
        StructField("event_time", TimestampType(), True),
        StructField("producer_name", StringType(), True),
        StructField("sequence_id", LongType(), True),
    ]
)

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("message_id", pa.string()),
        pa.field("publish_time", pa.timestamp("us", tz="UTC")),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("producer_name", pa.string()),
        pa.field("sequence_id", pa.int64()),
    ]
)


_ATTEMPT_FIELDS = (("delivered_at", TimestampType(), pa.timestamp("us", tz="UTC")),
                   ("ended_at", TimestampType(), pa.timestamp("us", tz="UTC")),
                   ("consumer", StringType(), pa.string()), ("address", StringType(), pa.string()),
                   ("ending", StringType(), pa.string()), ("reason", StringType(), pa.string()))
ATTEMPTS_ARROW_TYPE = pa.list_(pa.struct([pa.field(n, a) for n, _s, a in _ATTEMPT_FIELDS]))
DEAD_LETTER_SCHEMA = StructType([
    *SCHEMA.fields,
    StructField("delivery_attempts", ArrayType(StructType([StructField(n, s, True) for n, s, _a in _ATTEMPT_FIELDS]),
                                               True), True),
])
DEAD_LETTER_ARROW_SCHEMA = ARROW_SCHEMA.append(pa.field("delivery_attempts", ATTEMPTS_ARROW_TYPE))


def reads_dead_letters(topics: Sequence[str]) -> bool:
    """The source has the delivery_attempts column: every topic named is a dead letter topic."""
    return bool(topics) and all(topic_role(t) is TopicRole.DEAD_LETTER for t in topics)


def attempts_column(props: dict[str, str]) -> list[dict[str, Any]] | None:
    """A dead letter's DELIVERY_ATTEMPTS as the rows of the delivery_attempts column."""
    value = props.get(DELIVERY_ATTEMPTS)
    if value is None:
        return None
    return [{"delivered_at": a.delivered_at_ms * 1000 or None, "ended_at": a.ended_at_ms * 1000 or None,
             "consumer": a.consumer, "address": a.address, "ending": a.ending, "reason": a.reason}
            for a in parse_attempts_property(value)]


class BatchBuilder:
    """Accumulates messages of one topic partition as columns; `build()` makes a RecordBatch.
    With `attempts`, the dead letter columns (delivery_attempts) too."""

    def __init__(self, topic: str, partition: int, attempts: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.attempts = attempts
        self.clear()

    def clear(self) -> None:
        self.keys: list[str | None] = []
        self.values: list[bytes] = []
        self.props: list[list[tuple[str, str]]] = []
        self.ids: list[str] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        self.producers: list[str] = []
        self.attempt_rows: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, msg: Any, mid: Any) -> None:
        self.keys.append(msg.partition_key() or None)
        self.values.append(msg.data())
        props = msg.properties()
        self.props.append(list(props.items()))
        if self.attempts:
            self.attempt_rows.append(attempts_column(props))
        self.ids.append(origin_message_id(mid.ledger_id(), mid.entry_id(), self.partition, mid.batch_index()))
        self.publish.append(msg.publish_timestamp() * 1000)
        et = msg.event_timestamp()
        self.event.append(et * 1000 if et else None)
        self.producers.append(msg.producer_name())

    def build(self) -> pa.RecordBatch:
        n = len(self.values)
        extra = [pa.array(self.attempt_rows, ATTEMPTS_ARROW_TYPE)] if self.attempts else []
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.string()),
                pa.array(self.values, pa.binary()),
                pa.array(self.props, pa.map_(pa.string(), pa.string())),
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.partition] * n, pa.int32()),
                pa.array(self.ids, pa.string()),
                pa.array(self.publish, pa.timestamp("us", tz="UTC")),
                pa.array(self.event, pa.timestamp("us", tz="UTC")),
                pa.array(self.producers, pa.string()),
                pa.nulls(n, pa.int64()),
                *extra,
            ],
            schema=DEAD_LETTER_ARROW_SCHEMA if self.attempts else ARROW_SCHEMA,
        )
        self.clear()
        return batch
