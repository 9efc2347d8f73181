"""The DLQ report's PNG on a real SparkSession: a DLQ whose dead letters all fell within one
minute is drawn in second buckets (not one bar), and the figure uses its width (no empty band
at either side)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.spark.dlq_report import dlq_report
from tests.conftest import BrokerProcess
from tests.spark.conftest import unique

START = 1_767_261_600_000  # 2026-01-01 10:00:00.000 UTC


def blank_margins(png: Any) -> tuple[float, float]:
    """The fractions of the width, left and right, in which every pixel is white."""
    inked = (png[:, :, :3] < 0.95).any(axis=(0, 2)).nonzero()[0]
    width = png.shape[1]
    return inked[0] / width, (width - 1 - inked[-1]) / width


def test_a_dlq_within_one_minute_gets_second_buckets_and_a_balanced_figure(
        spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    dlq = unique("minute-DLQ")
    producer = pclient.create_producer(dlq)
    offsets = [250 + 2_000 * i for i in range(20)]  # 10:00:00.250 .. 10:00:38.250, one every 2 s
    for i, offset in enumerate(offsets):
        producer.send(f"d{i}".encode(), properties={
            mp.DEAD_LETTER_REASON: mp.REASON_TERMINATED, mp.DEAD_LETTER_TIME: str(START + offset),
            mp.REAL_TOPIC: "persistent://public/default/orders", mp.DEAD_LETTER_DESCRIPTION: "bad json"})
    producer.close()
    report = dlq_report(spark, spark_broker.url, dlq, tmp_path / "report")
    assert report.total == 20 and report.time_bucket == "second"
    assert report.drawn is not None
    assert ("first", "2026-01-01 10:00:00.250 UTC") in report.drawn.summary
    assert ("last", "2026-01-01 10:00:38.250 UTC") in report.drawn.summary
    bars = report.drawn.charts["by second (UTC)"]
    assert len(bars) == 39 and sum(c for _, c in bars) == 20 and max(c for _, c in bars) == 1
    assert bars[0] == ("2026-01-01 10:00:00", 1) and bars[1] == ("2026-01-01 10:00:01", 0)

    import matplotlib.image

    left, right = blank_margins(matplotlib.image.imread(str(report.png_path)))
    assert left < 0.04 and right < 0.04, (left, right)
    if os.environ.get("LETTERBOX_UPDATE_SCREENSHOTS") == "1":  # docs/spark.md's picture: five hours of them
        from tests.spark.test_dlq_jobs import fill_readable_dlq

        readable = unique("orders-enrich-DLQ")
        fill_readable_dlq(pclient, readable, [unique("orders"), unique("payments"), unique("shipping")])
        picture = dlq_report(spark, spark_broker.url, readable, tmp_path / "docs").png_path
        shutil.copyfile(picture, Path(__file__).resolve().parents[2] / "docs" / "images" / "dlq-report.png")
