"""docs/spark.md "Running on a cluster", followed literally: the blocks between the
cluster markers run in order in an empty directory — the Spark master, the two
workers and the Spark Connect server (the blocks that start a Spark process) in
the background in their own process groups, killed at the end whatever happens;
the Python block that names a file is written to it, the other Python block runs
with this interpreter; the `letterbox pipeline run` blocks with bash. Only ports
are replaced (7077, 8088, 15002 by free ones, 6650 by the test broker's). Then the
local-mode pipeline test runs through the documented Spark Connect server."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from letterbox import message_properties as mp
from tests.conftest import BrokerProcess
from tests.spark import test_pipeline
from tests.spark.cluster import SparkProcess, free_port, spark_env
from tests.spark.conftest import LocalSpark
from tests.spark.test_pipeline import sink_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
BLOCK_RE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    start, end = text.index("<!-- cluster:start -->"), text.index("<!-- cluster:end -->")
    return BLOCK_RE.findall(text[start:end])


def _sink_values(path: Path) -> list[int]:
    import pyarrow.parquet as pq

    values: list[int] = []
    for batch in path.glob("batch_id=*"):
        for f in batch.glob("*.parquet"):
            values += [int(v) for v in pq.read_table(f).column("value").to_pylist()]
    return sorted(values)


@dataclass
class Documented:
    dir: Path
    summaries: list[str]
    connect_url: str
    logs: str


@pytest.fixture(scope="module")
def documented(spark_broker: BrokerProcess, local_spark: LocalSpark,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Documented]:
    """The doc's blocks, run; the Spark processes they started stay up for the module's tests."""
    tmp_path = tmp_path_factory.mktemp("cluster-doc")
    blocks = _blocks()
    assert [kind for kind, _ in blocks] == ["sh", "sh", "sh", "python", "python", "sh", "sh", "sh"]
    local_spark.stop()  # frees memory and cores on this machine while the cluster runs
    ports = {"7077": str(free_port()), "8088": str(free_port()), "15002": str(free_port()),
             "pulsar://localhost:6650": spark_broker.url}
    env = spark_env(tmp_path / "spark-logs")
    (tmp_path / "spark-logs").mkdir()
    env.pop("SPARK_NO_DAEMONIZE")  # the doc's --wait does it for the Connect server
    env.pop("SPARK_DAEMON_MEMORY")  # as a user's shell: the Connect server is a driver, it needs more
    background: list[SparkProcess] = []
    summaries: list[str] = []
    try:
        for i, (kind, body) in enumerate(blocks):
            for old, new in ports.items():
                body = body.replace(old, new)
            if kind == "python" and body.startswith("# "):
                (tmp_path / body.splitlines()[0].lstrip("# ").strip()).write_text(body)
            elif kind == "python":
                out = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, out.stderr
            elif "spark-class" in body or "start-connect-server.sh" in body:
                p = SparkProcess(f"block-{i}", ["bash", "-c", "exec " + body], env, tmp_path / f"block-{i}.log")
                background.append(p)
                if "deploy.master.Master" in body:
                    p.wait_for(r"Starting Spark master at")
                elif "deploy.worker.Worker" in body:
                    p.wait_for(r"Successfully registered with master")
                else:
                    p.wait_for(r"Spark Connect server started at", timeout=120)
            else:
                out = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=240)
                assert out.returncode == 0, f"{body}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr[-4000:]}"
                summaries.append(out.stdout.strip())
        yield Documented(tmp_path, summaries, f"sc://127.0.0.1:{ports['15002']}",
                         "\n".join(p.text()[-1500:] for p in background))
    finally:
        for p in reversed(background):
            p.kill()


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
def test_running_on_a_cluster_as_documented(documented: Documented, pclient: Any) -> None:
    summaries, logs = documented.summaries, documented.logs
    # one summary per pipeline run; both runs read the whole topic under their own subscription
    assert len(summaries) == 2, logs
    assert re.fullmatch(r"pipeline enrich: 100 records read in \d+ micro-batches: 90 to the sink, 0 retried, "
                        r"10 dead-lettered", summaries[0]), summaries[0]
    assert re.fullmatch(r"pipeline enrich-connect: 100 records read in \d+ micro-batches: 90 to the sink, "
                        r"0 retried, 10 dead-lettered", summaries[1]), summaries[1]
    expected = sorted(2 * n for n in range(100) if n % 10)
    for sink in ("enriched", "enriched-connect"):
        assert sink_rows(str(documented.dir / "lake" / sink)) == 90
        assert _sink_values(documented.dir / "lake" / sink) == expected
    for subscription in ("enrich", "enrich-connect"):
        dead = _read_all(pclient, f"cluster-orders-{subscription}-DLQ")
        assert sorted(int(m.data()) for m in dead) == list(range(0, 100, 10))
        assert {m.properties()[mp.DEAD_LETTER_REASON] for m in dead} == {mp.REASON_TERMINATED}


@pytest.mark.timeout(600)  # a cluster (and its JVMs) starts in the first test's setup
def test_pipeline_exactly_once_through_spark_connect(
    documented: Documented, spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    """The local-mode pipeline test (a Python worker killed mid-task, a stop and a restart from
    the checkpoint, exactly once) through the documented Spark Connect server on its cluster."""
    from letterbox.spark.pipeline.runner import is_connect
    from letterbox.spark.session import connect_session

    remote = connect_session(documented.connect_url)
    try:
        assert is_connect(remote)
        test_pipeline.routes_exactly_once_across_kills_and_a_restart(remote, spark_broker, pclient, tmp_path, 4_000)
    finally:
        remote.stop()
        # the Connect builder marks the whole process as "connect mode"; local sessions follow
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def _read_all(client: Any, topic: str) -> list[Any]:
    import pulsar

    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(10_000))
        return out
    finally:
        reader.close()

