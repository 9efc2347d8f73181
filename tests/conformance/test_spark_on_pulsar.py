"""letterbox's Spark side on Apache Pulsar itself: the batch source's offsets, a retry pipeline,
the SQL redrive and the DLQ report of tests/spark run here unchanged, with the reference Apache
Pulsar as `spark_broker` (a real local SparkSession, as in tests/spark). As tests/spark's broker,
the namespace has deduplication on while they run: the redrive and the sink count on it to be
idempotent (docs/migrate.md)."""
from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.conformance.targets import Running, Target
from tests.spark.conftest import local_spark, pclient, spark
from tests.spark.test_batch_read import test_min_partitions_and_offsets
from tests.spark.test_cli_pipeline import test_cli_runs_a_handler_module
from tests.spark.test_dlq_jobs import (
    test_dlq_report_table_and_png,
    test_redrive_selects_with_sql_and_is_idempotent,
)
from tests.spark.test_pipeline import test_a_retried_record_is_not_processed_before_its_delay

__all__ = [
    "local_spark", "pclient", "spark",
    "test_a_retried_record_is_not_processed_before_its_delay",
    "test_cli_runs_a_handler_module",
    "test_dlq_report_table_and_png",
    "test_min_partitions_and_offsets",
    "test_redrive_selects_with_sql_and_is_idempotent",
]

pytestmark = pytest.mark.timeout(600)


def _deduplication(admin_url: str, method: str) -> None:
    req = urllib.request.Request(f"{admin_url}/admin/v2/namespaces/public/default/deduplication",
                                 data=b"true" if method == "POST" else None, method=method,
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


@pytest.fixture(scope="module")
def spark_broker(reference: Target) -> Iterator[Running]:
    _deduplication(reference.admin_url, "POST")
    try:
        yield Running(reference.service_url, reference.admin_url)
    finally:  # the differential scenarios after this module see the namespace as Pulsar starts it
        _deduplication(reference.admin_url, "DELETE")
