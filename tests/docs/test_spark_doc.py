"""docs/spark.md run as written, with a real local SparkSession: the blocks of the `api` region
(session, reading, the attempt log, SQL over a DLQ, streaming, writing, the DLQ report and
redrive) and of the `example` region (the complete example: a handler module, orders produced,
`letterbox pipeline run`, then the DLQ in SQL, reported and partly redriven), each region in an
empty directory against a fresh broker with deduplication on (letterbox.testing.Broker), python
blocks in one interpreter that keeps its names (tests/docs/test_doc_blocks.DocSession), sh
blocks with bash -e. Only the ports change. A python block whose first line is `# NAME.py` is
also written to that file (the doc tells the reader to save it there). Then what the doc says
came out is checked: the counts of the complete example."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from letterbox.testing import Broker
from tests.docs.doc_blocks import Block
from tests.docs.test_doc_blocks import SHELL, DocSession, region_blocks

DOC = "docs/spark.md"
FILE_HEADER = re.compile(r"#\s*([\w./-]+\.py)\n")
pytestmark = pytest.mark.slow


class SparkDoc:
    """A fresh broker and a python session in `cwd` that runs the doc's blocks in order."""

    def __init__(self, cwd: Path, broker: Broker) -> None:
        self.cwd = cwd
        self.ports = {"6650": str(broker.port), "8080": str(broker.admin_port)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.update(LETTERBOX_SERVICE_URL=broker.url, LETTERBOX_ADMIN_URL=broker.admin_url)
        self.env = env
        self.session = DocSession(cwd, env)

    def run(self, block: Block) -> str:
        body = block.body
        for old, new in self.ports.items():
            body = body.replace(old, new)
        if block.lang == "python":
            named = FILE_HEADER.match(body)
            if named:
                (self.cwd / named.group(1)).write_text(body)
            answer = self.session.run_python(body)
            assert answer["ok"], f"{block.where}:\n{block.body}\n{answer['error']}"
            return str(answer["stdout"])
        out = subprocess.run(["bash", "-e", "-c", SHELL.replace("BODY", body)], cwd=self.cwd, env=self.env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"{block.where}:\n{block.body}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
        return out.stdout

    def value(self, expression: str) -> object:
        answer = self.session.run_python(f"print(__import__('json').dumps({expression}))")
        assert answer["ok"], answer.get("error")
        return json.loads(str(answer["stdout"]).strip().splitlines()[-1])

    def close(self) -> None:
        self.session.run_python("""
from pyspark.sql import SparkSession
if SparkSession.getActiveSession() is not None:
    SparkSession.getActiveSession().stop()
""")
        self.session.close()


@pytest.fixture
def spark_doc(tmp_path: Path) -> Iterator[SparkDoc]:
    pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[spark]'")
    with Broker(settings={"deduplication_enabled": True}) as broker:
        doc = SparkDoc(tmp_path, broker)
        try:
            yield doc
        finally:
            doc.close()
        assert "Traceback" not in broker.log(), broker.log()


def test_the_api_blocks_run_as_written(spark_doc: SparkDoc) -> None:
    todo = region_blocks(DOC, "api")
    assert len(todo) >= 9, [b.where for b in todo]
    out = "".join(spark_doc.run(block) for block in todo)
    assert "max-redeliveries" in out  # the DLQ's reasons, as the SQL blocks show them
    assert spark_doc.value("spark.read.parquet('lake/orders').count()") == 4  # the stream's sink
    report = spark_doc.value("report.total")
    assert report == 6 and (spark_doc.cwd / "reports" / "dlq-report.png").stat().st_size > 10_000


def test_the_complete_example_runs_as_written(spark_doc: SparkDoc) -> None:
    todo = region_blocks(DOC, "example")
    assert [b.lang for b in todo] == ["python", "sh", "python"], [b.where for b in todo]
    assert (spark_doc.run(todo[0]), (spark_doc.cwd / "orders_job.py").is_file()) == ("", True)
    spark_doc.run(todo[1])
    spark_doc.run(todo[2])
    # what the doc says came out: 970 good orders, 10 terminated and 20 max-redeliveries after 2 tries,
    # and the redrive of the 20
    assert spark_doc.value("spark.read.parquet('lake/totals').count()") == 970
    rows = spark_doc.value("sorted([list(r) for r in spark.sql(\"SELECT properties['DEAD_LETTER_REASON'], "
                           "properties['RECONSUMETIMES'], count(*) FROM dlq GROUP BY 1, 2\").collect()])")
    assert rows == [["max-redeliveries", "2", 20], ["terminated", "0", 10]], rows
