"""Spark pipeline throughput vs a plain official-client read loop.

    .venv/bin/python benchmarks/spark_pipeline.py [--messages 1000000] [--partitions 2] [--master local[2]]

Publishes N 100-byte messages (batched producer) to a fresh broker, then
1. reads them with a plain official-client Reader loop in one process;
2. runs the pipeline's Python work alone (read + route, one process, no
   Spark, no sink: the 1 % retries are published for real);
3. reads them with the `letterbox` Spark source (batch count, no handler);
4. runs the retry / dead-letter pipeline over them: 1 % of the records fail
   once (Retry, 1 s tier) and then succeed, the rest succeed; sink = Parquet.
and prints a table: wall time, records/s, and the pipeline's time split per
micro-batch phase (Spark's own durationMs: latestOffset, addBatch, ...).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _broker import Broker, cpu_seconds


def publish(url: str, topic: str, n: int) -> float:
    import pulsar

    client = pulsar.Client(url)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=1000, block_if_queue_full=True,
        max_pending_messages=20000,
    )
    body = b"x" * 90
    t0 = time.perf_counter()
    for i in range(n):
        producer.send_async(b"%09d|" % i + body, None, partition_key=str(i))
    producer.flush()
    elapsed = time.perf_counter() - t0
    client.close()
    return elapsed


def plain_loop(url: str, topic: str, n: int) -> float:
    import pulsar

    client = pulsar.Client(url)
    parts = client.get_topic_partitions(topic)
    t0 = time.perf_counter()
    total = 0
    for p in parts:  # one process, one partition after the other
        reader = client.create_reader(p, pulsar.MessageId.earliest, receiver_queue_size=5000)
        while reader.has_message_available():
            msg = reader.read_next(10_000)
            msg.data()
            total += 1
        reader.close()
    elapsed = time.perf_counter() - t0
    client.close()
    assert total == n, (total, n)
    return elapsed


def python_read_and_route(url: str, topic: str, n: int) -> float:
    """The pipeline's per-record Python work (read + route, no Spark, no sink) in one
    process: the mapInArrow function of a micro-batch, given every partition's range."""
    import pyarrow as pa

    from letterbox.spark.broker_io import last_position, open_client
    from letterbox.spark.offsets import EARLIEST
    from letterbox.spark.pipeline.policy import PipelineTopics, RetryPolicy
    from letterbox.spark.pipeline.router import RouterConfig, route_ranges
    from letterbox.topic_name import TopicName

    policy = RetryPolicy(max_retries=3, delays=(1.0,))
    topics = PipelineTopics.build(topic, "bench-py", policy)
    client = open_client(url)
    ranges = [
        {
            "topic": topics.source, "partition": TopicName.parse(p).partition_index, "partition_topic": p,
            "start_ledger": EARLIEST.ledger, "start_entry": EARLIEST.entry,
            "end_ledger": end.ledger, "end_entry": end.entry,
        }
        for p in client.get_topic_partitions(topic)
        for end in [last_position(client, p)]
    ]
    client.close()
    route = route_ranges(RouterConfig(url, topics, policy, handler), 10_000, True)
    t0 = time.perf_counter()
    total = sum(b.num_rows for b in route(iter([pa.RecordBatch.from_pylist(ranges)])))
    elapsed = time.perf_counter() - t0
    assert total == n - n // 100, total
    return elapsed


def committed_rows(sink: str) -> int:
    """Rows in the sink's committed batch directories (read from Parquet footers only)."""
    import pyarrow.parquet as pq

    total = 0
    for d in Path(sink).glob("batch_id=*"):
        if (d / "_SUCCESS").exists():
            total += sum(pq.ParquetFile(f).metadata.num_rows for f in d.glob("*.parquet"))
    return total


def handler(rec: Any) -> Any:
    from letterbox.spark.pipeline import Retry

    if rec.attempt == 0 and rec.value[:9].endswith(b"00") and int(rec.value[:9]) % 100 == 0:
        return Retry(error="transient")
    return None  # success: the input value goes to the sink


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-records-per-trigger", type=int, default=200_000)
    args = ap.parse_args()
    n = args.messages
    work = Path(tempfile.mkdtemp(prefix="lb-spark-bench-"))
    os.environ["LETTERBOX_DEDUPLICATION_ENABLED"] = "true"
    os.environ["LETTERBOX_AUTO_TOPIC_CREATION_TYPE"] = "partitioned"
    os.environ["LETTERBOX_DEFAULT_NUM_PARTITIONS"] = str(args.partitions)
    os.environ["LETTERBOX_RETENTION_TIME_MINUTES"] = "-1"
    broker = Broker(work / "data", sync="normal").start()
    try:
        topic = "bench-src"
        t_pub = publish(broker.url, topic, n)
        print(f"published {n} in {t_pub:.1f}s", flush=True)
        t_plain = plain_loop(broker.url, topic, n)
        print(f"plain loop {t_plain:.1f}s", flush=True)
        t_py = python_read_and_route(broker.url, topic, n)
        print(f"python read+route {t_py:.1f}s", flush=True)

        from letterbox.spark.pipeline import Pipeline, RetryPolicy
        from letterbox.spark.session import local_session

        spark = local_session(args.master, "bench", **{"spark.sql.streaming.numRecentProgressUpdates": "100000"})
        t0 = time.perf_counter()
        cnt = spark.read.format("letterbox").option("service_url", broker.url).option("topic", topic).load().count()
        t_read = time.perf_counter() - t0
        assert cnt == n
        print(f"spark source count {t_read:.1f}s", flush=True)

        sink = str(work / "sink")
        cpu0 = cpu_seconds(broker.pid) or 0.0
        p = Pipeline(
            spark=spark, service_url=broker.url, topic=topic, subscription="bench", handler=handler,
            sink=sink, checkpoint=str(work / "ck"), policy=RetryPolicy(max_retries=3, delays=(1.0,)),
            max_records_per_trigger=args.max_records_per_trigger, trigger_interval="200 milliseconds",
        )
        t0 = time.perf_counter()
        q = p.start()
        done_at = None
        while done_at is None:
            if committed_rows(sink) >= n:  # every record succeeded (the 1 % on their retry)
                done_at = time.perf_counter() - t0
            elif q.exception() is not None:
                raise RuntimeError(q.exception())
            time.sleep(0.1)
        progress = list(q.recentProgress)
        q.stop()
        broker_cpu = (cpu_seconds(broker.pid) or 0.0) - cpu0
        in_sink = spark.read.parquet(sink).count()
        assert in_sink == n, (in_sink, n)
        tier = next(iter(p.topics.tiers.values()))
        retried = spark.read.format("letterbox").option("service_url", broker.url).option("topic", tier).load().count()
        assert retried == n // 100, (retried, n // 100)
        phases: dict[str, float] = {}
        for pr in progress:
            if pr["durationMs"].get("addBatch", 0) > 50:  # micro-batches that did work
                for k, v in pr["durationMs"].items():
                    phases[k] = phases.get(k, 0.0) + v / 1000
        batches = sum(1 for pr in progress if pr["durationMs"].get("addBatch", 0) > 50)
        spark.stop()

        print()
        print("| what | wall s | records/s |")
        print("|---|---|---|")
        print(f"| publish {n} x 100 B (batched producer) | {t_pub:.1f} | {n / t_pub:,.0f} |")
        print(f"| plain official-client Reader loop, 1 process | {t_plain:.1f} | {n / t_plain:,.0f} |")
        print(f"| pipeline's Python work alone: read + route, 1 process, no Spark, no sink | {t_py:.1f} | {n / t_py:,.0f} |")
        print(f"| Spark `letterbox` source, batch count ({args.master}) | {t_read:.1f} | {n / t_read:,.0f} |")
        print(f"| pipeline, 1 % retried once ({args.master}) | {done_at:.1f} | {n / done_at:,.0f} |")
        print()
        print(f"pipeline: {batches} micro-batches with data, {retried} records went through {tier}, "
              f"broker CPU {broker_cpu:.1f}s; summed phase times (s):")
        for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
            print(f"  {k}: {v:.1f}")
        print("working micro-batches (addBatch s):", [round(pr["durationMs"]["addBatch"] / 1000, 1)
              for pr in progress if pr["durationMs"].get("addBatch", 0) > 50])
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
