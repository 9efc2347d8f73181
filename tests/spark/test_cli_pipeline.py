"""`letterbox pipeline run MODULE:HANDLER ...` end to end, and its errors."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from letterbox import message_properties as mp
from tests.conftest import BrokerProcess
from tests.spark.conftest import unique

CLI = [sys.executable, "-m", "letterbox", "pipeline", "run"]


def test_cli_runs_a_handler_module(spark: Any, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    topic = unique("cli-src")
    producer = pclient.create_producer(topic)
    for i in range(50):
        producer.send(f"{i}".encode())
    (tmp_path / "myjob.py").write_text(
        textwrap.dedent(
            """
            from letterbox.spark.pipeline import Fail

            def handle(record):
                n = int(record.value)
                if n % 10 == 0:
                    return Fail(f"multiple of ten: {n}")
                return str(n * 2)
            """
        )
    )
    sink = tmp_path / "out"
    proc = subprocess.run(
        [*CLI, "myjob:handle", "--topic", topic, "--subscription", "cli", "--sink", str(sink),
         "--service-url", spark_broker.url, "--master", "local[1]", "--stop-after-idle", "4",
         "--trigger-interval", "200 milliseconds"],
        cwd=tmp_path, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = spark.read.parquet(str(sink)).collect()
    assert sorted(int(bytes(r.value)) for r in out) == sorted(2 * n for n in range(50) if n % 10)
    dead = (
        spark.read.format("letterbox").option("service_url", spark_broker.url)
        .option("topic", f"{topic}-cli-DLQ").load().collect()
    )
    assert sorted(int(bytes(r.value)) for r in dead) == [0, 10, 20, 30, 40]
    assert {dict(r.properties)[mp.DEAD_LETTER_REASON] for r in dead} == {mp.REASON_TERMINATED}


def test_cli_reports_a_handler_it_cannot_load(tmp_path: Path) -> None:
    for spec, fragment in [
        ("no_colon", "MODULE:FUNCTION"),
        ("missing_module_xyz:handle", "cannot import module"),
        ("json:no_such_function", "has no function"),
    ]:
        proc = subprocess.run(
            [*CLI, spec, "--topic", "t", "--subscription", "s", "--sink", str(tmp_path / "o")],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 2
        assert fragment in proc.stderr
