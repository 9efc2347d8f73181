"""Streaming reads: checkpointed offsets, admission control, the durable subscription's backlog."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from letterbox.spark.query_start import start_query
from tests.conftest import BrokerProcess, wait_until
from tests.spark.conftest import backlog, create_partitioned, unique


def test_stop_and_restart_from_checkpoint_is_exactly_once(
    spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    topic = unique("stream")
    create_partitioned(spark_broker, topic, 2)
    producer = pclient.create_producer(topic, block_if_queue_full=True)
    first = 3000
    for i in range(first):
        producer.send_async(f"m{i}".encode(), None, partition_key=str(i))
    producer.flush()
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start() -> Any:
        stream = (
            spark.readStream.format("letterbox")
            .option("service_url", spark_broker.url)
            .option("topic", topic)
            .option("subscription", "to-parquet")
            .option("max_records_per_trigger", "500")
            .load()
        )
        return start_query(
            lambda: stream.select("value", "message_id", "partition")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ck)
            .trigger(processingTime="200 milliseconds")
            .start(),
            "to-parquet",
        )

    def batches(q: Any) -> list[dict[str, Any]]:
        return [p for p in q.recentProgress if p["numInputRows"] > 0]

    q = start()
    try:
        assert wait_until(lambda: len(batches(q)) >= 2, timeout=120, interval=0.2)
        # admission control: no micro-batch takes more than max_records_per_trigger
        assert all(p["numInputRows"] <= 500 for p in batches(q))
    finally:
        q.stop()  # mid-stream: 3000 records need at least 6 micro-batches
    done_before = spark.read.parquet(out).count()
    assert 0 < done_before < first
    assert backlog(spark_broker, topic, "to-parquet", 2) > 0  # retention keeps the unprocessed rest

    for i in range(first, first + 1000):
        producer.send_async(f"m{i}".encode(), None, partition_key=str(i))
    producer.flush()
    total = first + 1000
    q = start()
    try:
        assert wait_until(lambda: spark.read.parquet(out).count() >= total, timeout=180, interval=0.5)
        # the last commit moves the subscription to the end: the pipeline's lag is 0
        assert wait_until(lambda: backlog(spark_broker, topic, "to-parquet", 2) == 0, timeout=60, interval=0.3)
    finally:
        q.stop()
    rows = spark.read.parquet(out).collect()
    assert len(rows) == total
    assert sorted(int(bytes(r.value).decode()[1:]) for r in rows) == list(range(total))
    assert len({(r.partition, r.message_id) for r in rows}) == total


def test_fail_on_data_loss(spark: Any, broker_factory: Any, tmp_path: Path) -> None:
    import json
    import urllib.request

    import pulsar

    b = broker_factory(tmp_path / "lossy")  # retention 0: acknowledged entries are deleted
    c = pulsar.Client(b.url)
    try:
        producer = c.create_producer("lossy")
        ids = [producer.send(f"m{i}".encode()) for i in range(10)]
        consumer = c.subscribe("lossy", "eater", initial_position=pulsar.InitialPosition.Earliest)
        for _ in range(10):
            consumer.acknowledge(consumer.receive(10_000))
        for i in range(10, 15):
            producer.send(f"m{i}".encode())

        def stored() -> int:
            url = f"{b.admin_url}/admin/v2/persistent/public/default/lossy/internalStats"
            with urllib.request.urlopen(url, timeout=10) as r:
                return int(json.load(r)["numberOfEntries"])

        assert wait_until(lambda: stored() == 5, timeout=60, interval=0.2)
        start = json.dumps({"lossy": {"-1": f"{ids[2].ledger_id()}:{ids[2].entry_id()}"}})
        base = (
            spark.read.format("letterbox").option("service_url", b.url).option("topic", "lossy")
            .option("starting_offsets", start)
        )
        try:
            base.load().collect()
            raise AssertionError("reading deleted entries should fail")
        except Exception as exc:
            assert "no longer stored" in str(exc)
        rows = base.option("fail_on_data_loss", "false").load().collect()
        assert sorted(bytes(r.value).decode() for r in rows) == [f"m{i}" for i in range(10, 15)]
        consumer.close()
    finally:
        c.close()
