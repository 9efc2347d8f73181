"""Damage injected into a stopped broker's data files, at chosen offsets of each kind of file
(an entry inside letterbox.db, a WAL frame with commits after it, a payload file, the
database file truncated): the broker never serves a damaged message as good, it refuses to
start naming the file and what to do (or fences the damaged topic's reads), the other topic
loses nothing, and `letterbox verify` names the file, the topic and the entry range."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.conftest import BrokerProcess, _quiet_logger

A, B = "persistent://public/default/damage-a", "persistent://public/default/damage-b"
N = 40
BIG = 1_200_000  # over LARGE_PAYLOAD_BYTES: stored in a payload file


def _body(topic: str, i: int) -> bytes:
    return f"{topic[-1]}-message-{i:04d}-".encode() * 8


def _fill(data_dir: Path, kill: bool) -> None:
    """N messages on each topic, each sent alone (one commit each), a large one on B; then a
    clean stop (WAL checkpointed away) or a kill -9 (the WAL holds the commits)."""
    b = BrokerProcess(data_dir).start()
    c = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        for topic in (A, B):
            p = c.create_producer(topic, batching_enabled=False)
            for i in range(N):
                p.send(_body(topic, i))
            if topic == B:
                p.send(b"L" * BIG)
            p.close()
    finally:
        c.close()
    if kill:
        b.kill()
    else:
        assert b.stop() == 0, b.log()


def _verify(data_dir: Path) -> tuple[int, dict[str, object]]:
    r = subprocess.run([sys.executable, "-m", "letterbox", "verify", "--data-dir", str(data_dir), "--json"],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, json.loads(r.stdout) if r.stdout.startswith("{") else {"stderr": r.stderr}


def _start_refused(data_dir: Path) -> str:
    b = BrokerProcess(data_dir).start(expect_ready=False)
    assert b.proc is not None
    if b.ports:  # it started: the damage went unnoticed
        b.stop()
        pytest.fail("the broker started on a damaged data dir:\n" + b.log())
    code = b.proc.wait(30)
    b.exited.wait(5)
    assert code == 2, b.log()
    lines = [line for line in b.log().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "Traceback" not in b.log(), b.log()
    return lines[0]


def _receive_all(url: str, topic: str, limit: float = 3.0) -> list[bytes]:
    c = pulsar.Client(url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        consumer = c.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
        got = []
        while True:
            try:
                m = consumer.receive(int(limit * 1000))
            except pulsar.Timeout:
                return got
            got.append(m.data())
            consumer.acknowledge(m)
    finally:
        c.close()


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    _fill(data, kill=False)
    yield data


def test_a_clean_data_dir_verifies(stopped: Path) -> None:
    code, report = _verify(stopped)
    assert code == 0, report
    assert report["damaged"] is False and report["entries"] == 2 * N + 1 and report["payload_files"] == 1


def _checkpoint(data_dir: Path) -> None:
    conn = sqlite3.connect(data_dir / "letterbox.db")
    try:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_flipped_bit_in_an_entry_is_never_served_and_verify_names_topic_and_entry(stopped: Path) -> None:
    _checkpoint(stopped)  # the entries are in letterbox.db itself, the WAL is empty
    db = stopped / "letterbox.db"
    raw = bytearray(db.read_bytes())
    target = _body(A, 7)
    at = raw.find(target)
    assert at > 0 and raw.find(target, at + 1) < 0
    raw[at + 3] ^= 0x10
    db.write_bytes(raw)
    code, report = _verify(stopped)
    assert code == 1
    findings = report["findings"]
    assert isinstance(findings, list)
    assert [(f["file"], f["topic"], f["first"], f["last"]) for f in findings] == [("letterbox.db", A, 7, 7)]
    b = BrokerProcess(stopped).start()
    try:
        got_a = _receive_all(b.url, A)
        got_b = _receive_all(b.url, B)
    finally:
        b.stop()
    assert got_a == [_body(A, i) for i in range(7)]  # up to the damaged entry, never past it
    assert got_b == [_body(B, i) for i in range(N)] + [b"L" * BIG]
    assert "entry 7 of topic " + A in b.log() and "fails its checksum" in b.log()
    assert "Traceback" not in b.log(), b.log()  # a warning line, not a stack


def test_a_flipped_bit_in_the_wal_refuses_the_start_naming_the_wal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data, kill=True)
    wal = data / "letterbox.db-wal"
    raw = bytearray(wal.read_bytes())
    assert len(raw) > 100_000
    raw[32 + 24 + 100] ^= 0x04  # inside the first frame's page: every later commit would be dropped
    wal.write_bytes(raw)
    line = _start_refused(data)
    assert "letterbox.db-wal" in line and "fails its checksum" in line and "letterbox verify" in line
    code, report = _verify(data)
    assert code == 1 and report["findings"][0]["file"] == "letterbox.db-wal"  # type: ignore[index]
    assert wal.read_bytes() == bytes(raw)  # the refused start changed nothing


def test_a_wal_cut_short_refuses_the_start_even_after_verify_read_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data, kill=True)
    wal = data / "letterbox.db-wal"
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size // 3)  # whole frames dropped, no checksum fails
    code, report = _verify(data)
    assert code == 1 and "cut short" in report["findings"][0]["what"]  # type: ignore[index]
    line = _start_refused(data)  # verify's read left the WAL index as the broker had it
    assert "letterbox.db-wal" in line and "cut short" in line


def test_a_torn_last_transaction_in_the_wal_is_replayed_away_not_refused(tmp_path: Path) -> None:
    """Frames of a commit a crash interrupted (never acknowledged) after the last commit: the
    broker starts, with every message, and warns once."""
    data = tmp_path / "data"
    _fill(data, kill=True)
    wal = data / "letterbox.db-wal"
    raw = wal.read_bytes()
    frame = 24 + int.from_bytes(raw[8:12], "big")
    last = bytearray(raw[-frame:])
    last[4:8] = b"\0\0\0\0"  # not a commit frame
    last[100] ^= 0xFF  # its checksum fails: the write was torn
    wal.write_bytes(raw + bytes(last))
    b = BrokerProcess(data).start()
    try:
        got = _receive_all(b.url, A, limit=1.5)
    finally:
        b.stop()
    assert got == [_body(A, i) for i in range(N)]
    assert "the last transaction of the write-ahead log is incomplete" in b.log()


def test_a_short_payload_file_refuses_the_start_naming_file_and_topic(stopped: Path) -> None:
    (payload,) = (stopped / "payloads").iterdir()
    with open(payload, "r+b") as f:
        f.truncate(BIG // 2)
    line = _start_refused(stopped)
    assert payload.name in line and B in line
    code, report = _verify(stopped)
    assert code == 1
    assert [(f["topic"], f["first"]) for f in report["findings"]] == [(B, N)]  # type: ignore[union-attr]


def test_a_truncated_database_refuses_the_start(stopped: Path) -> None:
    _checkpoint(stopped)
    db = stopped / "letterbox.db"
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)
    line = _start_refused(stopped)
    assert "letterbox.db" in line and "letterbox restore" in line
    code, _ = _verify(stopped)
    assert code == 1
