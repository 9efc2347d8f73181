"""Dead-letter report (table + PNG) and the idempotent Spark redrive."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from letterbox.failure import fingerprint
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
    # failure groups: the broker's fingerprint, computed by the same function
    timeouts = fingerprint({mp.DEAD_LETTER_REASON: mp.REASON_MAX_REDELIVERIES,
                            mp.DEAD_LETTER_DESCRIPTION: "TimeoutError: upstream"})
    bad_json = fingerprint({mp.DEAD_LETTER_REASON: mp.REASON_TERMINATED,
                            mp.DEAD_LETTER_DESCRIPTION: "bad json at byte 9\ntraceback..."})
    assert list(zip(report.by_group["group"], report.by_group["pattern"], report.by_group["count"],
                    strict=True)) == [(timeouts, "TimeoutError: upstream", 20),
                                      (bad_json, "bad json at byte <n> traceback...", 10)]
    text = report.text_path.read_text()
    assert "dead letters: 30" in text and "bad json at byte 3" in text and "by failure group" in text
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


LONG_ERROR = ("ValidationError: field 'shipping_address.postal_code' of order does not match the pattern "
              "for country DE (expected five digits), got 'D-1O115' after normalisation of the input")


def fill_readable_dlq(pclient: Any, dlq: str, sources: list[str]) -> list[dict[str, str]]:
    """40 dead letters over five hours with an empty hour, three reasons, three sources and a long error."""
    producer = pclient.create_producer(dlq)
    sent = []
    for i in range(40):
        hour = (0, 1, 1, 3, 4, 4, 4, 5)[i % 8]  # nothing in hour 2
        reason = (mp.REASON_MAX_REDELIVERIES, mp.REASON_TERMINATED, mp.REASON_EXPIRED)[(0, 0, 0, 1, 1, 2, 0, 1)[i % 8]]
        props = {
            mp.REAL_TOPIC: f"persistent://public/default/{sources[i % 3 if i % 7 else 0]}",
            mp.DEAD_LETTER_REASON: reason,
            mp.DEAD_LETTER_DESCRIPTION: LONG_ERROR if i % 4 == 0 else ("TimeoutError: upstream" if i % 4 != 3 else ""),
            mp.DEAD_LETTER_TIME: str(HOUR_A + hour * 3_600_000 + i * 1000),
        }
        producer.send(f"d{i}".encode(), properties=props)
        sent.append(props)
    producer.close()
    return sent


def test_dlq_report_png_shows_the_data(spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    from collections import Counter

    from letterbox.spark.dlq_chart import short_label, short_topic

    dlq, sources = unique("readable-DLQ"), [unique("orders"), unique("payments"), unique("shipping")]
    sent = fill_readable_dlq(pclient, dlq, sources)
    report = dlq_report(spark, spark_broker.url, dlq, tmp_path / "report")
    assert report.drawn is not None
    drawn = report.drawn

    reasons = Counter(p[mp.DEAD_LETTER_REASON] for p in sent)
    assert drawn.summary == [
        ("dead letters", "40"),
        ("first", "2026-01-01 10:00 UTC"),
        ("last", "2026-01-01 15:00 UTC"),
        ("time buckets", "per hour"),
        *[(f"reason: {r}", str(c)) for r, c in sorted(reasons.items(), key=lambda rc: -rc[1])],
    ]
    assert dict(drawn.charts["by reason"]) == dict(reasons)
    by_source = Counter(short_topic(p[mp.REAL_TOPIC]) for p in sent)
    assert dict(drawn.charts["by source topic"]) == dict(by_source)
    errors = Counter(short_label(p[mp.DEAD_LETTER_DESCRIPTION] or "(none)") for p in sent)
    assert dict(drawn.charts["top 3 errors"]) == dict(errors)
    # the long error is wrapped on two lines and ellipsised, no line over 42 characters
    [long_label] = [label for label, _ in drawn.charts["top 3 errors"] if label.startswith("ValidationError")]
    assert long_label.count("\n") == 1 and long_label.endswith("…")
    assert all(len(line) <= 42 for line in long_label.splitlines())
    # five hours of data: hourly buckets, the empty hour drawn as 0
    hours = Counter(int(p[mp.DEAD_LETTER_TIME]) // 3_600_000 for p in sent)
    first = HOUR_A // 3_600_000
    assert drawn.charts["by hour (UTC)"] == [
        (f"2026-01-01 {10 + h:02d}:00", hours.get(first + h, 0)) for h in range(6)]
    assert drawn.charts["by hour (UTC)"][2][1] == 0
    # the PNG is the size the report says it drew
    import matplotlib.image

    png = matplotlib.image.imread(str(report.png_path))
    assert (png.shape[1], png.shape[0]) == drawn.size_px == (1600, 1200)
