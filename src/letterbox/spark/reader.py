# Batch reads: `spark.read.format("letterbox")`. The driver fixes every
# partition's [start, end) when Spark plans the query; executors read exactly
# those entries with the official client's Reader.
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from letterbox.spark.broker_io import open_client
from letterbox.spark.offsets import EARLIEST
from letterbox.spark.options import ReadOptions
from letterbox.spark.planning import (
    PartitionTopic,
    TopicRange,
    check_source,
    read_partition,
    resolve,
    resolve_topics,
    split_ranges,
)

_NOTHING = TopicRange(PartitionTopic("", "", -1), EARLIEST, EARLIEST)


class LetterboxBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        check_source(self.opts)
        client = open_client(self.opts.service_url, auth=self.opts.auth)
        try:
            ranges = []
            for pt in resolve_topics(self.opts, client):
                end = resolve(self.opts.ending_offsets, pt, client, None)
                start = resolve(self.opts.starting_offsets, pt, client, end)
                ranges.append(TopicRange(pt, start, end))
        finally:
            client.close()
        # Spark needs at least one partition; an empty range reads nothing
        return split_ranges(ranges, self.opts.min_partitions) or [_NOTHING]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicRange)
        if not partition.pt.name:
            return
        yield from read_partition(self.opts, partition)
