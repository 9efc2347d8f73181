"""Spark test fixtures: one local SparkSession and one dedup-enabled broker for the whole session."""
from __future__ import annotations

import json
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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from letterbox.spark.session import local_session

    # local[2,4]: two cores, and a failed task is retried (up to 4 attempts) as on a cluster
    s = local_session("local[2,4]", "letterbox-tests", **{"spark.sql.shuffle.partitions": "2"})
    yield s
    s.stop()


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
