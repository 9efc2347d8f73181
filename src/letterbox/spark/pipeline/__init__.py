"""The retry / dead-letter pipeline on Spark (see docs/spark.md)."""
from __future__ import annotations

from letterbox.spark.pipeline.outcomes import Fail, Record, Retry
from letterbox.spark.pipeline.policy import (
    SEED_DELAY_LEVELS,
    PipelineTopics,
    PolicyError,
    RetryPolicy,
)
from letterbox.spark.pipeline.runner import Pipeline, parquet_sink

__all__ = [
    "SEED_DELAY_LEVELS",
    "Fail",
    "Pipeline",
    "PipelineTopics",
    "PolicyError",
    "Record",
    "Retry",
    "RetryPolicy",
    "parquet_sink",
]
