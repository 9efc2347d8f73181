"""Spark support for letterbox: the `letterbox` PySpark data source, the retry /
dead-letter pipeline, DLQ reports and redrive. See docs/spark.md."""
from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make `spark.read.format("letterbox")` (and readStream / write / writeStream) available."""
    from letterbox.spark.source import LetterboxDataSource

    spark.dataSource.register(LetterboxDataSource)


__all__ = ["register"]
