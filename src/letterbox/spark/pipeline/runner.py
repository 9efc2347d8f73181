# The driver side of the pipeline: one structured streaming query that reads
# the source topic and the delay-tier retry topics (only their due prefix)
# through the `letterbox` data source with a durable subscription, and in
# foreachBatch routes every record (router.py) and hands the successes to the
# sink. The source emits position ranges (emit=ranges), not records: each
# task reads its range with the official client and routes it in the same
# Python worker, so a record crosses into the JVM once, as a sink row. The default sink writes Parquet under `<sink>/batch_id=<N>`,
# overwriting that directory when a batch is re-run after a restart, so the
# sink holds every success exactly once. With count_outcomes the driver
# keeps totals of this run (micro-batches; records to the sink, retried,
# dead-lettered) per micro-batch: in Spark accumulators on a classic session;
# through Spark Connect (no accumulators there, and foreachBatch runs on the
# server) each task adds one count row to its output, which is split from the
# sink rows and written as a small JSON file per batch under
# `<checkpoint>/letterbox-counts/run=<run id>/batch-<N>`, read back through the session.
# Figures for a summary, not a ledger (a batch re-run after a restart is
# counted again).
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from letterbox.auth_options import AuthOptions
from letterbox.spark.pipeline.policy import PipelineTopics, RetryPolicy
from letterbox.spark.pipeline.router import SINK_DDL, RouterConfig, route_ranges
from letterbox.spark.query_start import start_query

SinkFn = Callable[[Any, int], None]
OUTCOMES = ("ok", "retry", "dead")


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (SparkSession.builder.remote(...))."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # pragma: no cover - PySpark without the Connect client
        return False
    return isinstance(spark, ConnectSession)


def parquet_sink(path: str) -> SinkFn:
    def write(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{path.rstrip('/')}/batch_id={batch_id}")

    return write


@dataclass
class Pipeline:
    """Read `topic` as `subscription`, call `handler` per record, route the outcomes.

    handler: Record -> output | Retry | Fail (or, with vectorized=True, a
    pandas DataFrame of records -> a sequence of those, one per row).
    sink: a Parquet directory, or a function (DataFrame, batch_id) -> None.
    """

    spark: Any
    service_url: str
    topic: str
    subscription: str
    handler: Callable[..., Any]
    sink: str | SinkFn
    checkpoint: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    vectorized: bool = False
    dead_letter_topic: str | None = None
    max_records_per_trigger: int | None = None
    trigger_interval: str = "1 second"
    starting_offsets: str = "earliest"
    read_timeout_ms: int = 10_000
    # credentials and TLS trust for every client the pipeline opens (auth_options.py)
    auth: AuthOptions = field(default_factory=AuthOptions)
    # keep outcome totals (needs a classic SparkContext for accumulators)
    count_outcomes: bool = False

    def __post_init__(self) -> None:
        self.topics = PipelineTopics.build(self.topic, self.subscription, self.policy, self.dead_letter_topic)
        self.batches = 0
        self.connect = is_connect(self.spark)
        self.run_id = uuid.uuid4().hex[:12]
        self.history: list[dict[str, int]] = []  # per micro-batch counts (classic session)
        self._counters: dict[str, Any] | None = None
        if self.count_outcomes and not self.connect:
            sc = self.spark.sparkContext
            self._counters = {name: sc.accumulator(0) for name in OUTCOMES}

    @property
    def counts_dir(self) -> str:
        return f"{self.checkpoint.rstrip('/')}/letterbox-counts/run={self.run_id}"

    def batch_counts(self) -> list[dict[str, int]]:
        """This run's micro-batches so far, oldest first: {batch_id, ok, retry, dead}."""
        if not self.connect or not self.count_outcomes:
            return list(self.history)
        try:
            rows = self.spark.read.schema("batch_id long, ok long, retry long, dead long").json(
                f"{self.counts_dir}/batch-*").collect()
        except Exception:  # no batch written yet: the directory does not exist
            return []
        return sorted(({k: int(r[k]) for k in ("batch_id", *OUTCOMES)} for r in rows), key=lambda b: b["batch_id"])

    def totals(self) -> dict[str, int]:
        """This run's micro-batches and outcomes so far (zeros without count_outcomes)."""
        batches = self.batch_counts()
        ok, retry, dead = (sum(b[name] for b in batches) for name in OUTCOMES)
        return {"batches": len(batches) if self.count_outcomes else self.batches, "records": ok + retry + dead,
                "ok": ok, "retried": retry, "dead_lettered": dead}

    def source(self) -> Any:
        reader = (
            self.spark.readStream.format("letterbox")
            .option("service_url", self.service_url)
            .option("topic", self.topics.source)
            .option("subscription", self.subscription)
            .option("starting_offsets", self.starting_offsets)
            .option("emit", "ranges")
            .options(**self.auth.spark_options())
            .option("retry_tiers", json.dumps({t: round(d * 1000) for d, t in self.topics.tiers.items()}))
        )
        if self.max_records_per_trigger:
            reader = reader.option("max_records_per_trigger", str(self.max_records_per_trigger))
        return reader.load()

    def process_batch(self, df: Any, batch_id: int) -> None:
        cfg = RouterConfig(self.service_url, self.topics, self.policy, self.handler, self.vectorized, self.auth)
        sink = parquet_sink(self.sink) if isinstance(self.sink, str) else self.sink
        if self.count_outcomes and self.connect:
            self._process_counting_rows(df, batch_id, cfg, sink)
            return
        before = {name: int(acc.value) for name, acc in (self._counters or {}).items()}
        routed = df.mapInArrow(route_ranges(cfg, self.read_timeout_ms, True, counters=self._counters), SINK_DDL)
        sink(routed, batch_id)
        self.batches += 1
        if self._counters is not None:
            self.history.append({"batch_id": batch_id, **{name: int(acc.value) - before[name]
                                                          for name, acc in self._counters.items()}})

    def _process_counting_rows(self, df: Any, batch_id: int, cfg: RouterConfig, sink: SinkFn) -> None:
        """Spark Connect: the tasks' count rows travel with the sink rows (persisted, so the
        handler runs once per record) and this batch's totals are written beside the checkpoint."""
        from pyspark.sql import functions as F

        routed = df.mapInArrow(route_ranges(cfg, self.read_timeout_ms, True, count_rows=True), SINK_DDL).persist()
        try:
            sink(routed.where(F.col("message_id").isNotNull()), batch_id)
            parts = routed.where(F.col("message_id").isNull()).select("properties").collect()
        finally:
            routed.unpersist()
        totals = {name: sum(int(r.properties[name]) for r in parts) for name in OUTCOMES}
        spark = df.sparkSession
        row = spark.createDataFrame([(batch_id, totals["ok"], totals["retry"], totals["dead"])],
                                    "batch_id long, ok long, retry long, dead long")
        row.coalesce(1).write.mode("overwrite").json(f"{self.counts_dir}/batch-{batch_id}")

    def start(self) -> Any:
        """Start the streaming query and return it (a StreamingQuery) once its source is set up
        (started again if Spark's Python worker for the source did not connect back in time:
        letterbox.spark.query_start)."""
        return start_query(
            lambda: self.source()
            .writeStream.queryName(f"letterbox-pipeline-{self.subscription}")
            .foreachBatch(self.process_batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=self.trigger_interval)
            .start(),
            f"letterbox-pipeline-{self.subscription}",
        )
