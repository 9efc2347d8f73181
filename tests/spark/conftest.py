"""Spark test fixtures: one local SparkSession and one dedup-enabled broker for the whole session."""
from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.slow)
    # the cluster modules stop the local SparkSession (one SparkContext per process): run them
    # after every local-mode test, so the local session starts once, not again after them
    items.sort(key=lambda item: Path(str(item.fspath)).name.startswith("test_cluster"))


class LocalSpark:
    """The tests' local SparkSession, made again if a cluster test module stopped it
    (one SparkContext per process: tests/spark/test_cluster.py needs its own)."""

    def __init__(self) -> None:
        self.session: Any = None

    def get(self) -> Any:
        from pyspark import SparkContext

        from letterbox.spark.session import local_session

        active = SparkContext._active_spark_context
        if self.session is None or active is None or active is not self.session.sparkContext:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # left by a Spark Connect session
            # local[2,4]: two cores, and a failed task is retried (up to 4 attempts) as on a cluster
            self.session = local_session("local[2,4]", "letterbox-tests", **{"spark.sql.shuffle.partitions": "2"})
        return self.session

    def stop(self) -> None:
        from pyspark import SparkContext

        if self.session is not None and SparkContext._active_spark_context is self.session.sparkContext:
            self.session.stop()
        self.session = None


@pytest.fixture(scope="session")
def local_spark() -> Iterator[LocalSpark]:
    holder = LocalSpark()
    yield holder
    holder.stop()


@pytest.fixture
def spark(local_spark: LocalSpark) -> Any:
    return local_spark.get()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("spark-broker") / "data",
        # keep acknowledged messages so tests can read retry tiers after the pipeline consumed them
        env={
            "LETTERBOX_DEDUPLICATION_ENABLED": "true",
            "LETTERBOX_SYNC": "normal",
            "LETTERBOX_RETENTION_TIME_MINUTES": "-1",
        },
    ).start()
    yield b
    b.stop()


@pytest.fixture
def pclient(spark_broker: BrokerProcess) -> Iterator[Any]:
    import logging

    import pulsar

    quiet = logging.getLogger("tests.pulsar-client")
    quiet.setLevel(logging.ERROR)
    c = pulsar.Client(spark_broker.url, operation_timeout_seconds=30, logger=quiet)
    yield c
    c.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_partitioned(broker: BrokerProcess, topic: str, partitions: int) -> None:
    req = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/public/default/{topic}/partitions",
        data=str(partitions).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).read()


def topic_stats(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/persistent/public/default/{topic}/stats", timeout=10) as r:
        return dict(json.load(r))


def backlog(broker: BrokerProcess, topic: str, subscription: str, partitions: int = 0) -> int:
    names = [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]
    total = 0
    for n in names:
        subs = topic_stats(broker, n)["subscriptions"]
        total += int(subs[subscription]["msgBacklog"]) if subscription in subs else 10**9
    return total


def tmp_dir(tmp_path: Path, name: str) -> str:
    p = tmp_path / name
    return str(p)


def msg_in(broker: BrokerProcess, topic: str) -> int:
    """Messages stored on a (non-partitioned) topic since the broker started; 0 if it does not exist yet."""
    try:
        return int(topic_stats(broker, topic)["msgInCounter"])
    except OSError:
        return 0
