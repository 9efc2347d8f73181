# The `letterbox` PySpark Python Data Source: one class that Spark asks for
# the schema, the batch and streaming readers and the batch and streaming
# writers. Options are parsed here, on the driver, so a mistake is reported
# before any task runs.
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from letterbox.spark.options import ReadOptions
from letterbox.spark.schema import SCHEMA


class LetterboxDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "letterbox"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from letterbox.spark.reader import LetterboxBatchReader

        return LetterboxBatchReader(ReadOptions.parse(self.options))
