"""A broker whose data directory turned read-only stops with one warning line saying
what could not be written, never a StorageFault traceback. Needs root (loop mount)."""
from __future__ import annotations

from pathlib import Path

import pulsar

from tests.broker.test_storage_faults import (  # noqa: F401 (fixture)
    HEALTH,
    api,
    client_for,
    ext4_fs,
)
from tests.conftest import BrokerProcess, wait_until

T = "persistent://public/default/ro-stop"


def test_stop_on_a_read_only_data_directory(ext4_fs: tuple[Path, Path]) -> None:  # noqa: F811
    mnt, trigger = ext4_fs
    broker = BrokerProcess(mnt / "data").start()
    try:
        client = client_for(broker)
        producer = client.create_producer(T, batching_enabled=False, send_timeout_millis=3000)
        consumer = client.subscribe(T, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"before")
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))  # cursor state to write at stop
        trigger.write_text("1")
        assert wait_until(lambda: api(broker, "GET", HEALTH)[0] == 503, 10.0)
        code = broker.stop()
        client.close()
    finally:
        broker.kill()
    log = broker.log()
    assert "Traceback" not in log, log
    assert code == 0, log
    stop_lines = [line for line in broker.lines if "stopping while storage writes fail" in line]
    assert len(stop_lines) == 1, log
