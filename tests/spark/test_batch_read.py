"""Batch reads of letterbox topics into Spark DataFrames."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from letterbox import message_properties as mp
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_partitioned, unique


def test_batch_read_100k_messages_of_a_4_partition_topic(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = unique("read100k")
    create_partitioned(spark_broker, topic, 4)
    n = 100_000
    producer = pclient.create_producer(topic, batching_enabled=True, batching_max_messages=500, block_if_queue_full=True)
    for i in range(n):
        producer.send_async(f"payload-{i}".encode(), None, partition_key=f"k{i}", properties={"i": str(i), "even": str(i % 2 == 0)})
    producer.flush()
    producer.close()

    df = spark.read.format("letterbox").option("service_url", spark_broker.url).option("topic", topic).load()
    assert df.rdd.getNumPartitions() >= 4
    rows = df.select("key", "value", "properties", "topic", "partition", "message_id").toPandas()
    assert len(rows) == n
    values = sorted(bytes(v).decode() for v in rows["value"])
    assert values == sorted(f"payload-{i}" for i in range(n))
    by_value = {bytes(r.value).decode(): r for r in rows.itertuples()}
    for i in (0, 1, 4_999, 77_777, n - 1):
        r = by_value[f"payload-{i}"]
        assert r.key == f"k{i}"
        assert dict(r.properties) == {"i": str(i), "even": str(i % 2 == 0)}
        assert r.topic == f"persistent://public/default/{topic}"
    assert all(dict(r.properties)["i"] == bytes(r.value).decode().split("-")[1] for r in rows.itertuples())
    assert set(rows["partition"]) == {0, 1, 2, 3}
    assert rows["message_id"].is_unique


def test_min_partitions_and_offsets(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = unique("offsets")
    producer = pclient.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(20)]
    base = spark.read.format("letterbox").option("service_url", spark_broker.url).option("topic", topic)
    df = base.option("min_partitions", "3").load()
    assert df.rdd.getNumPartitions() >= 3
    assert sorted(bytes(r.value).decode() for r in df.collect()) == sorted(f"m{i}" for i in range(20))
    # starting inclusive, ending exclusive, by message position
    start, end = ids[5], ids[15]
    spec = '{"%s": {"-1": "%d:%d"}}'
    part = (
        base.option("starting_offsets", spec % (topic, start.ledger_id(), start.entry_id()))
        .option("ending_offsets", spec % (topic, end.ledger_id(), end.entry_id()))
        .load()
    )
    got = sorted((bytes(r.value).decode() for r in part.collect()), key=lambda v: int(v[1:]))
    assert got == [f"m{i}" for i in range(5, 15)]
    latest = base.option("starting_offsets", "latest").load()
    assert latest.count() == 0


@pytest.mark.letterbox_extension("the broker dead-letters here through the consumer property "
                                 "letterbox.dlq.max_redeliveries, a letterbox extension (Apache Pulsar ignores it)")
def test_dead_letter_topic_is_queryable_with_sql(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = unique("orders")
    dlq = f"{topic}-billing-DLQ"
    # the broker moves poison messages to <topic>-billing-DLQ itself (max redeliveries 1)
    consumer = pclient.subscribe(
        topic,
        "billing",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=50,
        properties={"letterbox.dlq.max_redeliveries": "1"},
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = pclient.create_producer(topic)
    for i in range(6):
        producer.send(f"order-{i}".encode(), properties={"n": str(i)})
    seen = 0
    while seen < 12:  # every message: first delivery + one redelivery, both nacked
        msg = consumer.receive(10_000)
        consumer.negative_acknowledge(msg)
        seen += 1
    from tests.conftest import wait_until

    reader_df = spark.read.format("letterbox").option("service_url", spark_broker.url).option("topic", dlq)
    assert wait_until(lambda: reader_df.load().count() == 6, timeout=30, interval=0.5)
    reader_df.load().createOrReplaceTempView("dead_letters")
    rows = spark.sql(
        f"""SELECT properties['{mp.DEAD_LETTER_REASON}'] AS reason,
                   properties['{mp.REAL_TOPIC}'] AS real_topic,
                   CAST(value AS STRING) AS body,
                   properties['n'] AS n
            FROM dead_letters WHERE properties['{mp.DEAD_LETTER_REASON}'] = '{mp.REASON_MAX_REDELIVERIES}'
            ORDER BY n"""
    ).collect()
    assert [r.body for r in rows] == [f"order-{i}" for i in range(6)]
    assert {r.reason for r in rows} == {mp.REASON_MAX_REDELIVERIES}
    assert {r.real_topic for r in rows} == {f"persistent://public/default/{topic}"}
    consumer.close()


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({}, "service_url is required"),
        ({"service_url": "pulsar://127.0.0.1:1"}, "topic, topics or topics_pattern"),
        ({"service_url": "pulsar://127.0.0.1:1", "topic": "a", "topics": "b"}, "only one of"),
        ({"service_url": "pulsar://127.0.0.1:1", "topic": "a", "starting_offsets": "{bad"}, "starting_offsets"),
        ({"service_url": "pulsar://127.0.0.1:1", "topic": "a", "min_partitions": "zero"}, "min_partitions"),
    ],
)
def test_bad_options_are_reported_by_name(spark: Any, options: dict[str, str], fragment: str) -> None:
    reader = spark.read.format("letterbox")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load().count()
    assert fragment in str(info.value)


def test_an_unreachable_broker_fails_fast_naming_the_url(spark: Any) -> None:
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"pulsar://127.0.0.1:{port}"
    began = time.monotonic()
    with pytest.raises(Exception) as info:
        spark.read.format("letterbox").option("service_url", url).option("topic", "t").load().count()
    assert f"cannot reach the broker at {url}" in str(info.value)
    assert time.monotonic() - began < 25  # the client's own operation timeout is 30 s, and it would retry
    stream = spark.readStream.format("letterbox").option("service_url", url).option("topic", "t").load()
    query = stream.writeStream.format("noop").start()
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(60)
        assert f"cannot reach the broker at {url}" in str(info.value)
    finally:
        query.stop()


def test_reading_a_topic_that_does_not_exist(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    missing = unique("never-created")
    full = f"persistent://public/default/{missing}"
    base = spark.read.format("letterbox").option("topic", missing)
    for reader in (base.option("service_url", spark_broker.url).option("admin_url", spark_broker.admin_url),
                   base.option("service_url", spark_broker.admin_url)):
        with pytest.raises(Exception) as info:
            reader.load().count()
        assert f"topic {full} does not exist" in str(info.value)
        assert "create_if_missing" in str(info.value)
    # with create_if_missing it reads as empty, and an existing topic reads as before
    reader = base.option("service_url", spark_broker.url).option("admin_url", spark_broker.admin_url)
    assert reader.option("create_if_missing", "true").load().count() == 0
    pclient.create_producer(missing).send(b"now it exists")
    assert [bytes(r.value) for r in reader.load().collect()] == [b"now it exists"]
    partitioned = unique("parted")
    create_partitioned(spark_broker, partitioned, 2)  # exists before any partition has data
    empty = spark.read.format("letterbox").option("service_url", spark_broker.url) \
        .option("admin_url", spark_broker.admin_url).option("topic", partitioned).load()
    assert empty.count() == 0
