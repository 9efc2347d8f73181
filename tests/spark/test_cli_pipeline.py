"""`letterbox pipeline run MODULE:HANDLER ...` end to end, and its errors."""
from __future__ import annotations

import json
import re
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
    # One summary line on stdout: every record read, 45 to the sink, the five Fails dead-lettered.
    [summary] = proc.stdout.splitlines()
    assert "records in," not in proc.stderr  # no progress lines when stderr is not a terminal
    assert summary.startswith("pipeline cli: 50 records read in "), summary
    assert summary.endswith(": 45 to the sink, 0 retried, 5 dead-lettered"), summary
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


def test_cli_summary_as_json_counts_retries(spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    topic = unique("cli-json")
    producer = pclient.create_producer(topic)
    for i in range(8):
        producer.send(f"{i}".encode())
    (tmp_path / "retryjob.py").write_text(
        textwrap.dedent(
            """
            from letterbox.spark.pipeline import Retry

            def handle(record):
                n = int(record.value)
                if n % 4 == 0 and record.attempt == 0:
                    return Retry(delay=1)
                return str(n)
            """
        )
    )
    proc = subprocess.run(
        [*CLI, "retryjob:handle", "--topic", topic, "--subscription", "cli-json", "--sink", str(tmp_path / "out"),
         "--service-url", spark_broker.url, "--master", "local[1]", "--stop-after-idle", "8",
         "--trigger-interval", "200 milliseconds", "--json", "--progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # the whole of stdout
    # 8 first attempts (0 and 4 retried once) + 2 second attempts = 10 records read, 8 to the sink.
    assert {k: summary[k] for k in ("subscription", "records", "ok", "retried", "dead_lettered")} == {
        "subscription": "cli-json", "records": 10, "ok": 8, "retried": 2, "dead_lettered": 0}
    assert summary["batches"] >= 2
    # --progress: one line per micro-batch on stderr, adding up to the summary
    lines = re.findall(r"^batch (\d+): (\d+) records in, (\d+) ok, (\d+) retried, (\d+) dead-lettered, lag (\d+)$",
                       proc.stderr, re.M)
    assert len(lines) == summary["batches"], proc.stderr[-3000:]
    assert [sum(int(line[i]) for line in lines) for i in range(1, 5)] == [10, 8, 2, 0]
    assert int(lines[-1][5]) == 0  # nothing left behind in the source topic


def test_progress_lines_only_on_a_terminal_by_default(spark_broker: BrokerProcess, pclient: Any, tmp_path: Path) -> None:
    from letterbox.cli.pipeline import progress_line, source_lag

    assert progress_line({"batch_id": 3, "ok": 940, "retry": 45, "dead": 15}, 18000) == (
        "batch 3: 1000 records in, 940 ok, 45 retried, 15 dead-lettered, lag 18000")
    src = "persistent://public/default/orders"
    progress = {"sources": [{
        "endOffset": json.dumps({f"{src}-partition-0": [7, 100], f"{src}-partition-1": [7, 50], f"{src}-x-RETRY-1s": [9, 1]}),
    }]}
    ends = {f"{src}-partition-0": (7, 160), f"{src}-partition-1": (7, 50), f"{src}-x-RETRY-1s": (9, 40)}
    assert source_lag(progress, src, ends.__getitem__) == 60  # the retry tier's backlog is not the source's lag
    assert source_lag({"sources": []}, src, ends.__getitem__) is None
    topic = unique("cli-tty")
    pclient.create_producer(topic).send(b"1")
    (tmp_path / "okjob.py").write_text("def handle(record):\n    return record.value\n")
    # stderr on a pseudo-terminal, as in an interactive shell: progress lines without --progress
    import os
    import pty
    import threading

    parent, child = pty.openpty()
    said: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:
                return
            if not chunk:
                return
            said.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [*CLI, "okjob:handle", "--topic", topic, "--subscription", "tty", "--sink", str(tmp_path / "out"),
             "--service-url", spark_broker.url, "--master", "local[1]", "--stop-after-idle", "3",
             "--trigger-interval", "200 milliseconds"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=child, text=True, timeout=280,
        )
    finally:
        os.close(child)
        reader.join(timeout=10)
        os.close(parent)
    terminal = b"".join(said).decode(errors="replace")
    assert proc.returncode == 0, terminal[-3000:]
    # a line starts after \n or \r: under load Spark's own stage bar (shown for stages over 0.5 s)
    # is on the terminal first and clears itself with "\r", so the progress line follows a "\r"
    lines = re.split(r"[\r\n]+", terminal)
    assert any(re.fullmatch(r"batch \d+: 1 records in, 1 ok, 0 retried, 0 dead-lettered, lag 0", line)
               for line in lines), terminal[-3000:]
    assert proc.stdout.startswith("pipeline tty: 1 records read in ")


def test_summary_line_names_every_count() -> None:
    from letterbox.cli.pipeline import summary_line

    line = summary_line("enrich", {"batches": 3, "records": 12, "ok": 9, "retried": 2, "dead_lettered": 1})
    assert line == ("pipeline enrich: 12 records read in 3 micro-batches: 9 to the sink, 2 retried, "
                    "1 dead-lettered")
