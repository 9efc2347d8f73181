"""The local-mode Spark tests, run again on a real Spark standalone cluster (a
master and two one-core workers started from the installed PySpark, executors
in their own JVMs and Python workers): the batch read, the streaming read with
a checkpoint restart, and the pipeline, with the same assertions; in the
pipeline run one worker is killed with SIGKILL (with its executor) while a
micro-batch runs, and the result does not change. (Spark Connect:
test_cluster_docs.py, on the cluster the docs start.)"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, wait_until
from tests.spark import test_batch_read, test_pipeline, test_stream_read
from tests.spark.cluster import SparkCluster
from tests.spark.conftest import LocalSpark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    c = SparkCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster_spark(cluster: SparkCluster, local_spark: LocalSpark) -> Iterator[Any]:
    from letterbox.spark.session import local_session

    local_spark.stop()  # one SparkContext per process
    s = local_session(cluster.url, "letterbox-cluster-tests", **cluster.session_conf())
    try:
        assert wait_until(lambda: _executors(s) >= 2, timeout=90, interval=0.3)
        yield s
    finally:
        s.stop()


def _executors(spark: Any) -> int:
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1  # minus the driver


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
def test_batch_read_on_the_cluster(cluster_spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    assert _executors(cluster_spark) == 2
    test_batch_read.test_min_partitions_and_offsets(cluster_spark, spark_broker, pclient)


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
@pytest.mark.letterbox_extension("the broker dead-letters here through the consumer property "
                                 "letterbox.dlq.max_redeliveries, a letterbox extension (Apache Pulsar ignores it)")
def test_dead_letter_sql_on_the_cluster(cluster_spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    test_batch_read.test_dead_letter_topic_is_queryable_with_sql(cluster_spark, spark_broker, pclient)


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
def test_stream_restart_from_checkpoint_on_the_cluster(
    cluster_spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    test_stream_read.test_stop_and_restart_from_checkpoint_is_exactly_once(cluster_spark, spark_broker, pclient, tmp_path)


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
def test_pipeline_exactly_once_across_a_killed_worker(
    cluster: SparkCluster, cluster_spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    killed: list[int] = []

    def busy_worker() -> int | None:
        """The worker whose executor runs a task now (executors are told apart by their
        block manager port, which each executor's log in its worker's directory names)."""
        infos = cluster_spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
        busy = {int(i.port()) for i in infos if i.numRunningTasks() > 0}
        for w in range(len(cluster.workers)):
            for log in (cluster.base / f"worker-{w}").glob("app-*/*/stderr"):
                m = re.search(r"NettyBlockTransferService' on port (\d+)", log.read_text(errors="replace"))
                if m and int(m.group(1)) in busy:
                    return w
        return None

    def kill_a_worker(query: Any) -> None:
        assert _executors(cluster_spark) == 2
        assert wait_until(lambda: busy_worker() is not None, timeout=60, interval=0.02)
        w = busy_worker()
        w = 1 if w is None else w  # its task ended in between: any worker still loses an executor
        cluster.kill_worker(w)  # the worker JVM, its executor and Python workers: SIGKILL, mid-task
        killed.append(w)

    test_pipeline.routes_exactly_once_across_kills_and_a_restart(
        cluster_spark, spark_broker, pclient, tmp_path, 6_000, while_running=kill_a_worker)
    assert killed
    # the driver lost that executor and finished on the other one
    assert wait_until(lambda: _executors(cluster_spark) == 1, timeout=60, interval=0.5)

