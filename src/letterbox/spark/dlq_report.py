# Dead-letter analysis on Spark: read a DLQ topic with the `letterbox` data
# source and count its messages by reason, source topic (REAL_TOPIC), error
# text (DEAD_LETTER_DESCRIPTION, first line, 120 characters) and hour
# (DEAD_LETTER_TIME, else the publish time). The result is four small pandas
# tables, written as a text report and a PNG with one bar chart per table.
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.auth_options import AuthOptions


@dataclass
class DlqReport:
    total: int
    by_reason: Any  # pandas DataFrames with columns [<dimension>, count]
    by_source: Any
    by_error: Any
    by_hour: Any
    text_path: Path
    png_path: Path

    def text(self) -> str:
        parts = [f"dead letters: {self.total}"]
        for title, table in (
            ("by reason", self.by_reason),
            ("by source topic", self.by_source),
            ("by error", self.by_error),
            ("by hour (UTC)", self.by_hour),
        ):
            parts.append(f"\n{title}\n" + (table.to_string(index=False) if len(table) else "(none)"))
        return "\n".join(parts) + "\n"


def dead_letters(spark: Any, service_url: str, dlq_topic: str, auth: AuthOptions | None = None) -> Any:
    """The DLQ as a DataFrame with reason, source, error and hour columns added."""
    from pyspark.sql import functions as F

    df = (spark.read.format("letterbox").option("service_url", service_url).option("topic", dlq_topic)
          .options(**(auth or AuthOptions()).spark_options()).load())
    props = F.col("properties")
    dead_ms = props.getItem(mp.DEAD_LETTER_TIME).cast("long")
    when = F.coalesce(F.timestamp_millis(dead_ms), F.col("publish_time"))
    error = F.substring(F.split(F.coalesce(props.getItem(mp.DEAD_LETTER_DESCRIPTION), F.lit("")), "\n").getItem(0), 1, 120)
    return (
        df.withColumn("reason", F.coalesce(props.getItem(mp.DEAD_LETTER_REASON), F.lit("(none)")))
        .withColumn("source", F.coalesce(props.getItem(mp.REAL_TOPIC), F.lit("(unknown)")))
        .withColumn("error", F.when(error == "", F.lit("(none)")).otherwise(error))
        .withColumn("hour", F.date_format(F.date_trunc("hour", when), "yyyy-MM-dd HH:00"))
    )


def dlq_report(spark: Any, service_url: str, dlq_topic: str, out_dir: str | Path, top_errors: int = 15,
               auth: AuthOptions | None = None) -> DlqReport:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = dead_letters(spark, service_url, dlq_topic, auth).select("reason", "source", "error", "hour").cache()
    try:
        total = df.count()
        tables = {
            dim: df.groupBy(dim).count().orderBy("count" if dim != "hour" else "hour", ascending=dim == "hour")
            for dim in ("reason", "source", "error", "hour")
        }
        pd_tables = {dim: t.limit(top_errors if dim == "error" else 1000).toPandas() for dim, t in tables.items()}
    finally:
        df.unpersist()
    report = DlqReport(
        total,
        pd_tables["reason"],
        pd_tables["source"],
        pd_tables["error"],
        pd_tables["hour"],
        out / "dlq-report.txt",
        out / "dlq-report.png",
    )
    report.text_path.write_text(report.text())
    _chart(report, dlq_topic)
    return report


def _chart(report: DlqReport, dlq_topic: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    panels = [
        (axes[0][0], report.by_reason, "reason", "by reason"),
        (axes[0][1], report.by_source, "source", "by source topic"),
        (axes[1][0], report.by_error, "error", "top errors"),
        (axes[1][1], report.by_hour, "hour", "by hour (UTC)"),
    ]
    for ax, table, col, title in panels:
        labels = [str(v)[:50] for v in table[col]] if len(table) else []
        if col == "hour":
            ax.bar(range(len(labels)), list(table["count"]) if len(table) else [], color="#4c72b0")
            ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        else:
            ax.barh(range(len(labels)), list(table["count"]) if len(table) else [], color="#c44e52")
            ax.set_yticks(range(len(labels)), labels, fontsize=7)
            ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel("dead letters" if col != "hour" else "")
    fig.suptitle(f"{dlq_topic}: {report.total} dead letters")
    fig.tight_layout()
    fig.savefig(report.png_path, dpi=100)
    plt.close(fig)
