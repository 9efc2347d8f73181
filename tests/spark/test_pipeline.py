"""The retry / dead-letter pipeline: routing, exactly once per attempt, delays."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.spark.pipeline import Fail, Pipeline, Record, Retry, RetryPolicy
from tests.conftest import BrokerProcess, wait_until
from tests.spark.conftest import backlog, create_partitioned, unique


def _count(fn: Any) -> int:
    try:
        return int(fn())
    except Exception:  # a directory being (over)written, a topic not created yet
        return -1


def sink_rows(sink: str) -> int:
    """Rows in the committed batch_id=N directories of a Parquet sink, from the files'
    footers (no Spark job: cheap to poll while the pipeline has the cores)."""
    import pyarrow.parquet as pq

    total = 0
    for batch in Path(sink).glob("batch_id=*"):
        try:
            if (batch / "_SUCCESS").exists():
                total += sum(pq.read_metadata(f).num_rows for f in batch.glob("*.parquet"))
        except OSError:  # a batch directory being overwritten
            continue
    return total


def running(q: Any, predicate: Callable[[], bool]) -> Callable[[], bool]:
    """predicate, for wait_until while the query `q` runs: fails at once, with the query's own
    error, when the query has stopped (rather than waiting out the deadline on a dead query)."""

    def check() -> bool:
        if not q.isActive:
            raise AssertionError(f"the streaming query stopped: {q.exception()}")
        return predicate()

    return check


def _read(spark: Any, url: str, topic: str) -> Any:
    return spark.read.format("letterbox").option("service_url", url).option("topic", topic).load()


def test_pipeline_routes_20k_records_exactly_once_across_a_worker_kill_and_a_restart(
    spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    routes_exactly_once_across_kills_and_a_restart(spark, spark_broker, pclient, tmp_path, 20_000)


def routes_exactly_once_across_kills_and_a_restart(
    spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path, n: int,
    while_running: Callable[[Any], None] | None = None, per_trigger: int = 1000,
) -> None:
    """The pipeline over n records (n a multiple of 100, at least 4,000): one Python worker
    exits mid-task, the driver stops mid-stream and resumes from the checkpoint, and
    `while_running(query)` (e.g. a Spark worker killed) is called in the second run
    once it has written more; every assertion is about the final result.

    With while_running the records are published unbatched: max_records_per_trigger counts
    entries, and producer batches of hundreds of records made the first micro-batch carry
    ~90% of the successes, so whether the second run still had 500 to write depended on
    whether the first run's q.stop() came before or after its second micro-batch (a
    running foreachBatch is finished, not cancelled). One record per entry, the first run
    stops after a few micro-batches and the second has thousands of records left."""
    topic = unique("orders")
    create_partitioned(spark_broker, topic, 2)
    producer = pclient.create_producer(topic, block_if_queue_full=True, batching_enabled=while_running is None)
    for i in range(n):
        producer.send_async(f"r{i}".encode(), None, partition_key=f"k{i}", properties={"i": str(i)})
    producer.flush()
    marker = str(tmp_path / "worker-killed")
    kill_at = min(12_345, n * 5 // 8 + 45)  # a record that succeeds at once

    def handler(rec: Record) -> Any:
        i = int(rec.value[1:])
        kind = i % 100
        if i == kill_at and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # kill this Python worker in the middle of a task, once
        if kind < 10:  # fail once, then succeed
            return Retry(error="transient") if rec.attempt == 0 else rec.value.upper()
        if kind < 15:
            raise RuntimeError(f"always failing {i}")
        if kind == 15:
            return Fail(f"malformed record {i}")
        return rec.value.upper()

    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")

    def pipeline() -> Pipeline:
        return Pipeline(
            spark=spark,
            service_url=spark_broker.url,
            topic=topic,
            subscription="etl",
            handler=handler,
            sink=sink,
            checkpoint=ck,
            policy=RetryPolicy(max_retries=3, delays=(0.5,)),
            max_records_per_trigger=per_trigger,
            trigger_interval="500 milliseconds",
        )

    p = pipeline()
    dlq = p.topics.dead_letter
    q = p.start()
    try:
        assert wait_until(running(q, lambda: sink_rows(sink) >= 1500), timeout=180, interval=0.2)
    finally:
        q.stop()  # the driver stops mid-stream; a new query resumes from the checkpoint
    in_sink_before = spark.read.parquet(sink).count()
    successes = n - n * 6 // 100
    assert in_sink_before < successes
    if while_running is not None:  # the second run has work to do while it is interfered with
        assert successes - in_sink_before >= 1000, (in_sink_before, successes)

    q = pipeline().start()
    try:
        if while_running is not None:
            assert wait_until(running(q, lambda: sink_rows(sink) >= in_sink_before + 500), timeout=180, interval=0.2), \
                f"the second run wrote {sink_rows(sink) - in_sink_before} rows in 180 s ({in_sink_before} before)"
            while_running(q)
        assert wait_until(running(q, lambda: sink_rows(sink) >= successes), timeout=240, interval=0.5)
        assert wait_until(running(q, lambda: _count(lambda: _read(spark, spark_broker.url, dlq).count()) >= n * 6 // 100),
                          timeout=120, interval=1)
        assert wait_until(running(q, lambda: backlog(spark_broker, topic, "etl", 2) == 0), timeout=60, interval=0.5)
    finally:
        q.stop()

    assert os.path.exists(marker), "the handler should have killed a worker once"
    rows = spark.read.parquet(sink).select("value", "attempt", "topic", "message_id", "properties").collect()
    got = sorted(int(bytes(r.value).decode()[1:]) for r in rows)
    expected = sorted(i for i in range(n) if i % 100 < 10 or i % 100 > 15)
    assert got == expected  # exactly the successes, each once
    assert all(bytes(r.value).startswith(b"R") for r in rows)  # the handler's output
    attempts = {int(bytes(r.value).decode()[1:]): r.attempt for r in rows}
    assert all(attempts[i] == (1 if i % 100 < 10 else 0) for i in expected)
    assert {r.topic for r in rows} == {f"persistent://public/default/{topic}"}

    dead = _read(spark, spark_broker.url, dlq).collect()
    dead_ids = sorted(int(dict(r.properties)["i"]) for r in dead)
    assert dead_ids == sorted(i for i in range(n) if 10 <= i % 100 <= 15)
    for r in dead:
        props = dict(r.properties)
        i = int(props["i"])
        assert props[mp.REAL_TOPIC] == f"persistent://public/default/{topic}"
        assert r.key == f"k{i}"
        if i % 100 == 15:
            assert props[mp.DEAD_LETTER_REASON] == mp.REASON_TERMINATED
            assert props[mp.RECONSUMETIMES] == "0"
            assert props[mp.DEAD_LETTER_DESCRIPTION] == f"malformed record {i}"
        else:
            assert props[mp.DEAD_LETTER_REASON] == mp.REASON_MAX_REDELIVERIES
            assert props[mp.RECONSUMETIMES] == "3"
            assert f"always failing {i}" in props[mp.DEAD_LETTER_DESCRIPTION]
        assert props[mp.ORIGIN_MESSAGE_ID].count(":") == 3


def test_a_retried_record_is_not_processed_before_its_delay(
    spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    topic = unique("delayed")
    producer = pclient.create_producer(topic)
    for i in range(5):
        producer.send(f"d{i}".encode())

    def handler(rec: Record) -> Any:
        if rec.attempt == 0:
            return Retry(delay=2.0)
        return f"{time.time():.3f}"

    p = Pipeline(
        spark=spark,
        service_url=spark_broker.url,
        topic=topic,
        subscription="later",
        handler=handler,
        sink=str(tmp_path / "sink"),
        checkpoint=str(tmp_path / "ck"),
        policy=RetryPolicy(max_retries=2, delays=(0.5, 2.0)),
        trigger_interval="100 milliseconds",
    )
    assert p.topics.tiers[2.0].endswith(f"{topic}-later-RETRY-2s")
    q = p.start()
    try:
        assert wait_until(lambda: _count(lambda: spark.read.parquet(str(tmp_path / "sink")).count()) >= 5, timeout=120, interval=0.3)
    finally:
        q.stop()
    processed = {r.message_id: r for r in spark.read.parquet(str(tmp_path / "sink")).collect()}
    assert len(processed) == 5
    retried = {dict(r.properties)[mp.ORIGIN_MESSAGE_ID]: r for r in _read(spark, spark_broker.url, p.topics.tiers[2.0]).collect()}
    assert len(retried) == 5
    for r in processed.values():
        sent_for_retry = retried[r.message_id].publish_time.timestamp()
        processed_at = float(bytes(r.value).decode())
        assert processed_at - sent_for_retry >= 2.0
        assert dict(retried[r.message_id].properties)[mp.DELAY_TIME] == "2000"


def test_vectorized_handler_over_pandas(spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    topic = unique("vectorized")
    producer = pclient.create_producer(topic)
    for i in range(200):
        producer.send(f"{i}".encode())

    def handler(frame: Any) -> list[Any]:
        numbers = frame["value"].map(lambda v: int(v))
        return [Fail(f"seven: {n}") if n % 10 == 7 else str(n * n) for n in numbers]

    p = Pipeline(
        spark=spark, service_url=spark_broker.url, topic=topic, subscription="vec", handler=handler,
        sink=str(tmp_path / "sink"), checkpoint=str(tmp_path / "ck"), vectorized=True,
        trigger_interval="200 milliseconds",
    )
    q = p.start()
    try:
        assert wait_until(lambda: _count(lambda: spark.read.parquet(str(tmp_path / "sink")).count()) >= 180, timeout=120, interval=0.3)
        assert wait_until(lambda: _count(lambda: _read(spark, spark_broker.url, p.topics.dead_letter).count()) >= 20, timeout=60, interval=0.3)
    finally:
        q.stop()
    out = sorted(int(bytes(r.value)) for r in spark.read.parquet(str(tmp_path / "sink")).collect())
    assert out == sorted(n * n for n in range(200) if n % 10 != 7)
    dead = _read(spark, spark_broker.url, p.topics.dead_letter).collect()
    assert sorted(int(bytes(r.value)) for r in dead) == [n for n in range(200) if n % 10 == 7]
    assert {dict(r.properties)[mp.DEAD_LETTER_REASON] for r in dead} == {mp.REASON_TERMINATED}
