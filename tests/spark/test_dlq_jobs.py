"""Dead-letter report (table + PNG) and the idempotent Spark redrive."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.spark.dlq_report import dlq_report
from letterbox.spark.redrive import redrive
from tests.conftest import BrokerProcess
from tests.spark.conftest import unique

HOUR_A = 1_767_261_600_000  # 2026-01-01 10:00 UTC
HOUR_B = HOUR_A + 3_600_000 + 120_000


def _fill_dlq(pclient: Any, dlq: str, src_a: str, src_b: str) -> None:
    producer = pclient.create_producer(dlq)
    for i in range(30):
        terminated = i % 3 == 0
        producer.send(
            f"dead-{i}".encode(),
            partition_key=f"k{i}",
            properties={
                "n": str(i),
                mp.REAL_TOPIC: f"persistent://public/default/{src_b if terminated else src_a}",
                mp.ORIGIN_MESSAGE_ID: f"7:{i}:-1:-1",
                mp.RECONSUMETIMES: "0" if terminated else "3",
                mp.DEAD_LETTER_REASON: mp.REASON_TERMINATED if terminated else mp.REASON_MAX_REDELIVERIES,
                mp.DEAD_LETTER_DESCRIPTION: "bad json at byte 3\ntraceback..." if terminated else "TimeoutError: upstream",
                mp.DEAD_LETTER_TIME: str(HOUR_A + i if i < 12 else HOUR_B + i),
            },
        )


def test_dlq_report_table_and_png(spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    dlq, a, b = unique("rep-DLQ"), unique("src-a"), unique("src-b")
    _fill_dlq(pclient, dlq, a, b)
    report = dlq_report(spark, spark_broker.url, dlq, tmp_path / "report")
    assert report.total == 30
    assert dict(zip(report.by_reason["reason"], report.by_reason["count"], strict=True)) == {
        mp.REASON_MAX_REDELIVERIES: 20,
        mp.REASON_TERMINATED: 10,
    }
    assert dict(zip(report.by_source["source"], report.by_source["count"], strict=True)) == {
        f"persistent://public/default/{a}": 20,
        f"persistent://public/default/{b}": 10,
    }
    assert dict(zip(report.by_error["error"], report.by_error["count"], strict=True)) == {
        "TimeoutError: upstream": 20,
        "bad json at byte 3": 10,
    }
    assert list(zip(report.by_hour["hour"], report.by_hour["count"], strict=True)) == [
        ("2026-01-01 10:00", 12),
        ("2026-01-01 11:00", 18),
    ]
    text = report.text_path.read_text()
    assert "dead letters: 30" in text and "bad json at byte 3" in text
    import matplotlib.image

    png = matplotlib.image.imread(str(report.png_path))
    assert report.png_path.stat().st_size > 20_000
    assert png.shape[0] >= 600 and png.shape[1] >= 1000


def test_redrive_selects_with_sql_and_is_idempotent(spark: Any, spark_broker: BrokerProcess, pclient: Any) -> None:
    dlq, a, b = unique("rd-DLQ"), unique("rd-a"), unique("rd-b")
    _fill_dlq(pclient, dlq, a, b)
    where = f"properties['{mp.DEAD_LETTER_REASON}'] = '{mp.REASON_TERMINATED}'"
    first = redrive(spark, spark_broker.url, dlq, where=where)
    assert first == {"selected": 10, "republished": 10}
    again = redrive(spark, spark_broker.url, dlq, where=where)
    assert again == {"selected": 10, "republished": 0}
    rows = spark.read.format("letterbox").option("service_url", spark_broker.url).option("topic", b).load().collect()
    assert sorted(int(dict(r.properties)["n"]) for r in rows) == list(range(0, 30, 3))
    for r in rows:
        props = dict(r.properties)
        assert r.key == f"k{props['n']}"
        assert props[mp.REAL_TOPIC] == f"persistent://public/default/{b}"
        assert props[mp.ORIGIN_MESSAGE_ID] == f"7:{props['n']}:-1:-1"
        assert not any(k.startswith("DEAD_LETTER_") for k in props)
        assert mp.RECONSUMETIMES not in props
    # nothing went to the other source topic
    other = spark.read.format("letterbox").option("service_url", spark_broker.url).option("topic", a).load()
    assert other.count() == 0
