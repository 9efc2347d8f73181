"""One data directory, one broker: a second `letterbox standalone` on a data
directory in use exits non-zero at once, naming the owner's pid and address;
the lock of a broker killed with SIGKILL is taken over by the next broker."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.storage.data_dir_lock import DataDirectoryInUse, DataDirLock
from tests.conftest import BrokerProcess, _quiet_logger


def second_broker(data_dir: Path) -> tuple[subprocess.CompletedProcess[str], float, set[str]]:
    """Run a broker on `data_dir`: its outcome, its wall time and the modules it imported
    (from -X importtime, whose lines are taken out of the returned stderr)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "letterbox", "standalone", "--data-dir", str(data_dir),
           "--port", "0", "--admin-port", "0", "--bind", "127.0.0.1"]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=dict(os.environ))
    elapsed = time.monotonic() - started
    lines = done.stderr.splitlines(keepends=True)
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    done.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return done, elapsed, imported


def test_second_broker_on_a_data_dir_in_use_exits_at_once(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first: BrokerProcess = broker_factory(data_dir)
    assert first.proc is not None
    done, elapsed, imported = second_broker(data_dir)
    assert done.returncode != 0
    # "at once": refused before the broker's own modules are even imported (no database
    # opened, no listener bound, nothing waited for), which no machine load can change;
    # and no lock wait or hang (the bound is 5x the 2.3-2.8 s measured at load 15-19)
    assert not {m for m in imported if m == "letterbox.standalone" or m.startswith("letterbox.broker")}, \
        sorted(m for m in imported if m.startswith("letterbox."))
    assert "letterbox.storage.data_dir_lock" in imported  # the importtime report was read
    assert elapsed < 15.0, f"took {elapsed:.2f}s"
    expected = (f"data directory {data_dir.resolve()} is in use by pid {first.proc.pid} "
                f"(listening on pulsar://127.0.0.1:{first.port})")
    assert expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # the first broker is untouched and still serves
    client = pulsar.Client(first.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        client.create_producer("persistent://public/default/still-mine").send(b"ok")
    finally:
        client.close()


def test_lock_of_a_killed_broker_is_taken_over(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first: BrokerProcess = broker_factory(data_dir)
    topic = "persistent://public/default/survives-kill"
    client = pulsar.Client(first.url, operation_timeout_seconds=10, logger=_quiet_logger())
    client.create_producer(topic).send(b"before the kill")
    client.close()
    first.kill()  # SIGKILL: no cleanup, the lock file stays behind with the old pid
    assert (data_dir / "letterbox.lock").exists()
    second: BrokerProcess = broker_factory(data_dir)
    assert second.proc is not None
    assert f'"pid": {second.proc.pid}' in (data_dir / "letterbox.lock").read_text()
    client = pulsar.Client(second.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(timeout_millis=10_000).data() == b"before the kill"
    finally:
        client.close()


def test_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    first, second = DataDirLock(tmp_path), DataDirLock(tmp_path)
    first.acquire("pulsar://example:6650")
    with pytest.raises(DataDirectoryInUse, match=rf"in use by pid {os.getpid()} \(listening on pulsar://example:6650\)"):
        second.acquire()
    assert not second.held
    first.release()
    second.acquire()
    assert second.held
    second.release()
