"""Writing DataFrames to letterbox topics, batch and streaming, without duplicates on retries."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import BrokerProcess, wait_until
from tests.spark.conftest import create_partitioned, msg_in, topic_stats, unique


def _read_all(spark: Any, url: str, topic: str) -> list[Any]:
    return spark.read.format("letterbox").option("service_url", url).option("topic", topic).load().collect()


def test_batch_write_keys_properties_and_partitions(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = unique("written")
    create_partitioned(spark_broker, topic, 3)
    rows = [(f"k{i}", f"v{i}".encode(), {"n": str(i)}) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value binary, properties map<string,string>").repartition(4)
    df.write.format("letterbox").option("service_url", spark_broker.url).option("topic", topic).mode("append").save()
    got = _read_all(spark, spark_broker.url, topic)
    assert sorted((r.key, bytes(r.value), dict(r.properties)["n"]) for r in got) == sorted(
        (k, v, p["n"]) for k, v, p in rows
    )
    by_key: dict[str, set[int]] = {}
    for r in got:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in by_key.values())  # a key always lands in one partition
    assert {r.partition for r in got} == {0, 1, 2}


def test_a_retried_write_task_does_not_duplicate(spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("retried-write")
    stats_url = spark_broker.admin_url
    n = 2000

    def fail_once_midway(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import json
        import time as t
        import urllib.request

        from pyspark import TaskContext

        ctx = TaskContext.get()
        first_attempt = ctx is not None and ctx.attemptNumber() == 0
        emitted = 0
        for b in batches:
            for start in range(0, b.num_rows, 250):
                part = b.slice(start, 250)
                yield part
                emitted += part.num_rows
                if first_attempt and emitted >= 1000:
                    # wait until the broker stored what this attempt sent, then fail the task
                    url = f"{stats_url}/admin/v2/persistent/public/default/{topic}/stats"
                    deadline = t.monotonic() + 30
                    while t.monotonic() < deadline:
                        try:
                            with urllib.request.urlopen(url, timeout=5) as r:
                                if json.load(r)["msgInCounter"] >= 500:
                                    break
                        except OSError:
                            pass
                        t.sleep(0.05)
                    raise RuntimeError("injected failure after part of the messages were published")

    df = spark.range(n).selectExpr("CAST(id AS STRING) AS key", "CAST(CONCAT('v', id) AS BINARY) AS value").coalesce(1)
    out = df.mapInArrow(fail_once_midway, df.schema)
    out.write.format("letterbox").option("service_url", spark_broker.url).option("topic", topic).mode("append").save()
    stats = topic_stats(spark_broker, topic)
    assert stats["msgInCounter"] == n  # the retried task's repeats were dropped by the broker
    got = _read_all(spark, spark_broker.url, topic)
    assert len(got) == n
    assert sorted(int(r.key) for r in got) == list(range(n))


def test_streaming_write_with_a_stable_producer_name(spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    src, dst = unique("ws-src"), unique("ws-dst")
    producer_client = __import__("pulsar").Client(spark_broker.url)
    p = producer_client.create_producer(src)
    for i in range(100):
        p.send(f"e{i}".encode(), partition_key=f"k{i}")
    stream = (
        spark.readStream.format("letterbox").option("service_url", spark_broker.url).option("topic", src).load()
        .selectExpr("key", "value", "map('copied', 'yes') AS properties")
    )
    q = (
        stream.writeStream.format("letterbox").option("service_url", spark_broker.url).option("topic", dst)
        .option("producer_name", "copy-job").option("checkpointLocation", str(tmp_path / "ck")).start()
    )
    try:
        assert wait_until(lambda: msg_in(spark_broker, dst) >= 100, timeout=90, interval=0.5)
        for i in range(100, 150):
            p.send(f"e{i}".encode(), partition_key=f"k{i}")
        assert wait_until(lambda: msg_in(spark_broker, dst) >= 150, timeout=90, interval=0.5)
    finally:
        q.stop()
        producer_client.close()
    got = _read_all(spark, spark_broker.url, dst)
    assert sorted(bytes(r.value).decode() for r in got) == sorted(f"e{i}" for i in range(150))
    assert {dict(r.properties)["copied"] for r in got} == {"yes"}


def test_streaming_write_needs_a_producer_name(spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    stream = spark.readStream.format("letterbox").option("service_url", spark_broker.url).option("topic", unique("x")).load()
    with pytest.raises(Exception, match="producer_name is required"):
        q = (
            stream.select("value").writeStream.format("letterbox").option("service_url", spark_broker.url)
            .option("topic", "y").option("checkpointLocation", str(tmp_path / "ck")).start()
        )
        try:
            q.processAllAvailable()
        finally:
            q.stop()
