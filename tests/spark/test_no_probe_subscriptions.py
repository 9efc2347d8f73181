"""The Spark source's latest-offset checks leave no subscription behind: each check reads the
partition's end with a Reader (a non-durable subscription the broker drops with its connection),
never a durable probe subscription whose backlog would pin retention if the driver died mid-check."""
from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from letterbox.cli.pipeline import LagProbe
from letterbox.spark.broker_io import last_position
from letterbox.spark.offsets import EARLIEST, Position
from tests.conftest import BrokerProcess, wait_until
from tests.spark.conftest import topic_stats, unique


class SubscribeSpy:
    """A pulsar.Client that records every subscribe (a durable subscription) and delegates the rest."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.subscribed: list[str] = []

    def subscribe(self, topic: str, subscription: str, *args: Any, **kwargs: Any) -> Any:
        self.subscribed.append(subscription)
        return self.client.subscribe(topic, subscription, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def _durable_subscriptions(broker: BrokerProcess, topic: str) -> list[str]:
    subs = topic_stats(broker, topic)["subscriptions"]
    return [name for name, s in subs.items() if s.get("isDurable", True)]


def test_latest_offset_checks_create_no_durable_subscription(spark_broker: BrokerProcess, pclient: Any) -> None:
    topic = unique("probe")
    full = f"persistent://public/default/{topic}"
    producer = pclient.create_producer(full)
    spy = SubscribeSpy(pclient)
    empty = last_position(spy, full)  # nothing published yet: nothing to read before it
    assert empty == EARLIEST or empty.entry == 0
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    seen_durable: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen_durable.update(_durable_subscriptions(spark_broker, topic))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(20):
            assert last_position(spy, full) == Position(ids[-1].ledger_id(), ids[-1].entry_id() + 1)
        probe = LagProbe(spark_broker.url, None)
        try:
            assert probe(full) == (ids[-1].ledger_id(), ids[-1].entry_id() + 1)
        finally:
            probe.close()
    finally:
        stop.set()
        watcher.join()
    assert spy.subscribed == []
    assert seen_durable == set()
    assert wait_until(lambda: topic_stats(spark_broker, topic)["subscriptions"] == {}, timeout=30, interval=0.2)


_DRIVER = """
import sys, time
from letterbox.spark.session import local_session
spark = local_session("local[1]", "probe-kill")
q = (spark.readStream.format("letterbox").option("service_url", sys.argv[1]).option("topic", sys.argv[2])
     .option("starting_offsets", "latest").load()
     .writeStream.format("noop").option("checkpointLocation", sys.argv[3])
     .trigger(processingTime="100 milliseconds").start())
while not any(p["numInputRows"] > 0 for p in q.recentProgress):
    time.sleep(0.1)
print("read", flush=True)  # the latest-offset checks saw messages published after the start
q.awaitTermination()
"""


def test_killed_streaming_driver_leaves_no_subscription(
    spark_broker: BrokerProcess, pclient: Any, tmp_path: Path
) -> None:
    topic = unique("probe-kill")
    full = f"persistent://public/default/{topic}"
    producer = pclient.create_producer(full)
    producer.send(b"before")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, spark_broker.url, full, str(tmp_path / "ck")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    lines: queue.Queue[bytes] = queue.Queue()
    assert driver.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in driver.stdout], daemon=True).start()  # type: ignore[union-attr]
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 240  # a Spark JVM starting on a loaded machine
        read = False
        while time.monotonic() < deadline and not read:
            producer.send(b"more")
            seen.update(_durable_subscriptions(spark_broker, topic))
            with contextlib.suppress(queue.Empty):
                read = lines.get(timeout=0.1).strip() == b"read"
        assert read, "the streaming query never read the messages published after its start"
        keep_checking = time.monotonic() + 3  # more checks, then the kill lands among them
        while time.monotonic() < keep_checking:
            seen.update(_durable_subscriptions(spark_broker, topic))
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its Spark JVM, mid-stream
        driver.wait(timeout=60)
    assert seen == set(), f"durable subscriptions made by latest-offset checks: {sorted(seen)}"
    assert wait_until(lambda: topic_stats(spark_broker, topic)["subscriptions"] == {}, timeout=60, interval=0.3), (
        topic_stats(spark_broker, topic)["subscriptions"], subprocess.run("ps -eo pid,pgid,ppid,etimes,cmd | grep -E 'pyspark|java|probe'", shell=True, capture_output=True, text=True).stdout
    )
