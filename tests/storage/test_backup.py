"""`letterbox backup` of a running broker while a producer keeps sending (small messages and
large ones, which live in payload files): the copy restored with `letterbox restore` passes
`letterbox verify` and holds every message receipted before the backup began. Restore
refuses a non-empty data dir without --force and a data dir a broker holds (as verify does);
with --force the files it replaces are moved aside."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pulsar

from tests.conftest import BrokerProcess, _quiet_logger

TOPIC = "persistent://public/default/backed-up"
BIG = 1_100_000  # stored in a payload file


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True, timeout=120)


def _body(i: int) -> bytes:
    return b"B%08d" % i + (b"x" * BIG if i % 500 == 0 else b"")


def test_backup_under_load_restores_every_receipted_message(tmp_path: Path) -> None:
    data, dest, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    b = BrokerProcess(data).start()
    receipted: list[int] = []
    stop = threading.Event()
    c = pulsar.Client(b.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        producer = c.create_producer(TOPIC, batching_enabled=True, batching_max_publish_delay_ms=2,
                                     max_pending_messages=2000, block_if_queue_full=True)

        def produce() -> None:
            i = 0
            while not stop.is_set():
                def done(res: pulsar.Result, _id: object, i: int = i) -> None:
                    if res == pulsar.Result.Ok:
                        receipted.append(i)
                producer.send_async(_body(i), done)
                i += 1
            producer.flush()

        t = threading.Thread(target=produce)
        t.start()
        while len(receipted) < 3000:
            stop.wait(0.05)
        before = set(receipted)  # receipted before the backup began
        r = _cli("backup", str(dest), "--data-dir", str(data))
        after = len(receipted)
        stop.set()
        t.join(30)
    finally:
        c.close()
        b.stop()
    assert r.returncode == 0, r.stderr
    assert after > len(before), "the producer was not running during the backup"
    assert _cli("restore", str(dest), "--data-dir", str(restored)).returncode == 0
    v = _cli("verify", "--data-dir", str(restored))
    assert v.returncode == 0, v.stdout + v.stderr
    b2 = BrokerProcess(restored).start()
    c2 = pulsar.Client(b2.url, operation_timeout_seconds=30, logger=_quiet_logger())
    got: set[int] = set()
    try:
        consumer = c2.subscribe(TOPIC, "check", initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=5000)
        while True:
            try:
                m = consumer.receive(2000)
            except pulsar.Timeout:
                break
            i = int(m.data()[1:9])
            assert m.data() == _body(i)
            got.add(i)
    finally:
        c2.close()
        b2.stop()
    assert before <= got
    assert any(i % 500 == 0 for i in before)  # a payload file made it into the copy


def test_restore_refuses_a_non_empty_or_running_data_dir_and_force_moves_files_aside(tmp_path: Path) -> None:
    data, dest, other = tmp_path / "data", tmp_path / "backup", tmp_path / "other"
    b = BrokerProcess(data).start()
    try:
        c = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
        c.create_producer(TOPIC).send(b"one")
        c.close()
        assert _cli("backup", str(dest), "--data-dir", str(data)).returncode == 0
        again = _cli("backup", str(dest), "--data-dir", str(data))
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not empty" in again.stderr
        running = _cli("restore", str(dest), "--data-dir", str(data), "--force")
        assert running.returncode == 2 and "in use" in running.stderr and running.stderr.count("\n") == 1
        checking = _cli("verify", "--data-dir", str(data))
        assert checking.returncode == 2 and "stopped broker" in checking.stderr and checking.stderr.count("\n") == 1
    finally:
        b.stop()
    other.mkdir()
    (other / "letterbox.db").write_bytes(b"an older database")
    refused = _cli("restore", str(dest), "--data-dir", str(other))
    assert refused.returncode == 2 and "--force" in refused.stderr and refused.stderr.count("\n") == 1
    forced = _cli("restore", str(dest), "--data-dir", str(other), "--force")
    assert forced.returncode == 0, forced.stderr
    (aside,) = tmp_path.glob("other.before-restore-*")
    assert (aside / "letterbox.db").read_bytes() == b"an older database"
    assert _cli("verify", "--data-dir", str(other)).returncode == 0
    not_a_backup = _cli("restore", str(tmp_path / "nothing"), "--data-dir", str(tmp_path / "new"))
    assert not_a_backup.returncode == 2 and "not a backup" in not_a_backup.stderr
