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
from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from letterbox.message_properties import origin_message_id

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


class BatchBuilder:
    """Accumulates messages of one topic partition as columns; `build()` makes a RecordBatch."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.clear()

    def clear(self) -> None:
        self.keys: list[str | None] = []
        self.values: list[bytes] = []
        self.props: list[list[tuple[str, str]]] = []
        self.ids: list[str] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        self.producers: list[str] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, msg: Any, mid: Any) -> None:
        self.keys.append(msg.partition_key() or None)
        self.values.append(msg.data())
        self.props.append(list(msg.properties().items()))
        self.ids.append(origin_message_id(mid.ledger_id(), mid.entry_id(), self.partition, mid.batch_index()))
        self.publish.append(msg.publish_timestamp() * 1000)
        et = msg.event_timestamp()
        self.event.append(et * 1000 if et else None)
        self.producers.append(msg.producer_name())

    def build(self) -> pa.RecordBatch:
        n = len(self.values)
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
            ],
            schema=ARROW_SCHEMA,
        )
        self.clear()
        return batch
