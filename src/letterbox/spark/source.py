# The `letterbox` PySpark Python Data Source: one class that Spark asks for
# the schema, the batch and streaming readers and the batch and streaming
# writers. Options are parsed here, on the driver, so a mistake is reported
# before any task runs.
from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from letterbox.spark.options import ReadOptions, WriteOptions
from letterbox.spark.planning import RANGES_DDL
from letterbox.spark.schema import DEAD_LETTER_SCHEMA, SCHEMA, reads_dead_letters


class LetterboxDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "letterbox"

    def schema(self) -> StructType | str:
        if str(self.options.get("emit", "records")).strip() == "ranges":
            return RANGES_DDL
        if reads_dead_letters(ReadOptions.parse(self.options).topics):
            return DEAD_LETTER_SCHEMA
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from letterbox.spark.reader import LetterboxBatchReader

        return LetterboxBatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from letterbox.spark.stream_reader import LetterboxStreamReader

        return LetterboxStreamReader(ReadOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from letterbox.spark.writer import LetterboxBatchWriter

        return LetterboxBatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from letterbox.spark.writer import LetterboxStreamWriter

        return LetterboxStreamWriter(WriteOptions.parse(self.options), schema)
