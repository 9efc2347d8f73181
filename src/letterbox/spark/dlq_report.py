# Dead-letter analysis on Spark: read a DLQ topic with the `letterbox` data
# source and count its messages by failure group (the broker's fingerprint,
# letterbox.failure.fingerprint, computed per row by the same function), reason,
# source topic (REAL_TOPIC), error
# text (DEAD_LETTER_DESCRIPTION, first line, 120 characters), hour and a time
# bucket (DEAD_LETTER_TIME, else the publish time) of a second, 5 or 15
# seconds, a minute, an hour or a day: the finest that cuts the data's span
# into at most MAX_BUCKETS, so dead letters that all fell within one minute get
# second buckets, not one bar. The result is small pandas tables, written as a text report
# and a PNG (dlq_chart.py) whose content the report also returns (`drawn`).
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.auth_options import AuthOptions
from letterbox.spark.dlq_chart import Drawn, draw, short_topic

SECOND_MS, MINUTE_MS, HOUR_MS, DAY_MS = 1_000, 60_000, 3_600_000, 86_400_000
MAX_BUCKETS = 60
# the bucket sizes, finest first: a DLQ that all fell within a minute gets seconds
BUCKETS = (("second", SECOND_MS), ("5 seconds", 5 * SECOND_MS), ("15 seconds", 15 * SECOND_MS),
           ("minute", MINUTE_MS), ("hour", HOUR_MS))
LABELS = {"minute": "%Y-%m-%d %H:%M", "hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d"}


def time_bucket(span_ms: int) -> tuple[str, int]:
    """The finest of BUCKETS (else a day) that cuts `span_ms` into at most MAX_BUCKETS buckets."""
    for name, size in BUCKETS:
        if span_ms // size < MAX_BUCKETS:
            return name, size
    return "day", DAY_MS


def bucket_label(start_ms: int, bucket: str) -> str:
    """A bucket's start in UTC, as precise as the bucket (seconds for sub-minute buckets)."""
    import datetime as dt

    t = dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC)
    return t.strftime(LABELS.get(bucket, "%Y-%m-%d %H:%M:%S"))


def moment_label(ms: int, bucket: str) -> str:
    """The first or last dead letter's time: to the minute, or to the millisecond when the
    buckets are seconds (everything happened within minutes)."""
    if bucket in LABELS:
        return bucket_label(ms, "minute")
    return bucket_label(ms, "second") + f".{ms % 1000:03d}"


@dataclass
class DlqReport:
    total: int
    by_reason: Any  # pandas DataFrames with columns [<dimension>, count]
    by_source: Any
    by_error: Any
    by_hour: Any
    text_path: Path
    png_path: Path
    by_time: Any = None  # [time, count] per `time_bucket`, every bucket from the first to the last
    time_bucket: str = "hour"
    first_ms: int | None = None
    last_ms: int | None = None
    drawn: Drawn | None = None  # what the PNG shows
    # [group, reason, error_class, pattern, count]: failure groups, largest first
    by_group: Any = None

    def text(self) -> str:
        parts = [f"dead letters: {self.total}"]
        groups = [] if self.by_group is None else [("by failure group", self.by_group)]
        for title, table in (
            *groups,
            ("by reason", self.by_reason),
            ("by source topic", self.by_source),
            ("by error", self.by_error),
            ("by hour (UTC)", self.by_hour),
        ):
            parts.append(f"\n{title}\n" + (table.to_string(index=False) if len(table) else "(none)"))
        return "\n".join(parts) + "\n"


def dead_letters(spark: Any, service_url: str, dlq_topic: str, auth: AuthOptions | None = None) -> Any:
    """The DLQ as a DataFrame with group, error_class, pattern, reason, source, error and hour
    columns added (group: the failure group's fingerprint, as the broker lists it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    # a lambda: a function with type hints makes Spark try to read it as a pandas UDF
    group_of = F.udf(lambda props: _group_row(props), StructType([StructField(n, StringType()) for n in ("group", "class", "pattern")]))

    df = (spark.read.format("letterbox").option("service_url", service_url).option("topic", dlq_topic)
          .options(**(auth or AuthOptions()).spark_options()).load())
    props = F.col("properties")
    dead_ms = props.getItem(mp.DEAD_LETTER_TIME).cast("long")
    when = F.coalesce(F.timestamp_millis(dead_ms), F.col("publish_time"))
    error = F.substring(F.split(F.coalesce(props.getItem(mp.DEAD_LETTER_DESCRIPTION), F.lit("")), "\n").getItem(0), 1, 120)
    return (
        df.withColumn("_g", group_of(props))
        .withColumn("group", F.col("_g.group")).withColumn("error_class", F.col("_g.class"))
        .withColumn("pattern", F.col("_g.pattern")).drop("_g")
        .withColumn("reason", F.coalesce(props.getItem(mp.DEAD_LETTER_REASON), F.lit("(none)")))
        .withColumn("source", F.coalesce(props.getItem(mp.REAL_TOPIC), F.lit("(unknown)")))
        .withColumn("error", F.when(error == "", F.lit("(none)")).otherwise(error))
        .withColumn("hour", F.date_format(F.date_trunc("hour", when), "yyyy-MM-dd HH:00"))
        .withColumn("when_ms", F.unix_millis(when))
    )


def _group_row(props: dict[str, str] | None) -> tuple[str, str, str]:
    """(fingerprint, error class, pattern) of a row's properties: the broker's failure group."""
    from letterbox.failure.fingerprint import failure_group

    g = failure_group(props or {})
    return g.fingerprint, g.error_class, g.pattern


def dlq_report(spark: Any, service_url: str, dlq_topic: str, out_dir: str | Path, top_errors: int = 15,
               auth: AuthOptions | None = None) -> DlqReport:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = dead_letters(spark, service_url, dlq_topic, auth).select(
        "group", "error_class", "pattern", "reason", "source", "error", "hour", "when_ms").cache()
    try:
        total = df.count()
        by_group = (df.groupBy("group", "reason", "error_class", "pattern").count()
                    .orderBy(["count", "group"], ascending=[False, True]).limit(top_errors).toPandas())
        tables = {
            dim: df.groupBy(dim).count().orderBy("count" if dim != "hour" else "hour", ascending=dim == "hour")
            for dim in ("reason", "source", "error", "hour")
        }
        pd_tables = {dim: t.limit(top_errors if dim == "error" else 1000).toPandas() for dim, t in tables.items()}
        bounds = df.agg({"when_ms": "min"}).first(), df.agg({"when_ms": "max"}).first()
        first_ms = None if bounds[0] is None else bounds[0][0]
        last_ms = None if bounds[1] is None else bounds[1][0]
        bucket, size = time_bucket((last_ms or 0) - (first_ms or 0))
        per_bucket = {int(r[0]): int(r[1]) for r in
                      df.groupBy((df.when_ms - df.when_ms % size).alias("b")).count().collect() if r[0] is not None}
    finally:
        df.unpersist()
    import pandas as pd

    starts = [] if first_ms is None or last_ms is None else \
        list(range(first_ms - first_ms % size, last_ms - last_ms % size + 1, size))
    by_time = pd.DataFrame({"time": [bucket_label(b, bucket) for b in starts],
                            "count": [per_bucket.get(b, 0) for b in starts]})
    report = DlqReport(
        total,
        pd_tables["reason"],
        pd_tables["source"],
        pd_tables["error"],
        pd_tables["hour"],
        out / "dlq-report.txt",
        out / "dlq-report.png",
        by_time=by_time,
        time_bucket=bucket,
        first_ms=first_ms,
        last_ms=last_ms,
        by_group=by_group,
    )
    report.text_path.write_text(report.text())
    report.drawn = _chart(report, dlq_topic)
    return report


def summary_rows(report: DlqReport) -> list[tuple[str, str]]:
    """The PNG's text panel: total, time range, bucket and the count per reason."""
    rows = [("dead letters", str(report.total))]
    if report.first_ms is not None and report.last_ms is not None:
        rows.append(("first", moment_label(report.first_ms, report.time_bucket) + " UTC"))
        rows.append(("last", moment_label(report.last_ms, report.time_bucket) + " UTC"))
    rows.append(("time buckets", f"per {report.time_bucket}"))
    rows += [(f"reason: {r}", str(int(c))) for r, c in zip(report.by_reason["reason"], report.by_reason["count"],
                                                            strict=True)]
    return rows


def _pairs(table: Any, col: str) -> list[tuple[str, int]]:
    return [(str(v), int(c)) for v, c in zip(table[col], table["count"], strict=True)] if len(table) else []


def _chart(report: DlqReport, dlq_topic: str) -> Drawn:
    sources = [(short_topic(s), c) for s, c in _pairs(report.by_source, "source")]
    return draw(
        report.png_path,
        f"{short_topic(dlq_topic)}: {report.total} dead letters",
        summary_rows(report),
        [("by reason", _pairs(report.by_reason, "reason"), False),
         ("by source topic", sources, False),
         (f"top {len(report.by_error)} errors", _pairs(report.by_error, "error"), True)],
        (f"by {report.time_bucket} (UTC)", _pairs(report.by_time, "time")),
    )
