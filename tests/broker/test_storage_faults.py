"""Storage faults are survivable: a broker whose data directory is on a small tmpfs is run into
a full disk (and a read-only remount) while it moves messages, redrives a dead letter topic and
takes SENDs. Every message is either still in its source or in its target exactly once, before
and after space returns and after a restart; the broker says it is degraded (health endpoint,
metric) and recovers by itself when space returns. Needs root (mount); skips elsewhere."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call, metric_total
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
HEALTH = "/admin/v2/brokers/health"
N = 10


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs for the broker's data directory."""
    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small tmpfs and need root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path) -> Path:
    """Take every free byte of the file system; returns the filler to delete."""
    path = mnt / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
            block = b"\0" * size
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)
    return path


def api(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return call(broker.admin_url, method, path, None if body is None else json.dumps(body))


def healthy(broker: BrokerProcess) -> bool:
    return api(broker, "GET", HEALTH)[0] == 200


def metric(broker: BrokerProcess, name: str, **labels: str) -> float:
    return metric_total(broker.admin_url, name, **labels)


def mid(msg: pulsar.Message) -> str:
    m = msg.message_id()
    return f"{m.ledger_id()}:{m.entry_id()}:{m.partition()}:{m.batch_index()}"


def dead_letter_origins(broker: BrokerProcess, dlq: str) -> list[str]:
    """ORIGIN_MESSAGE_ID of every live dead letter of `dlq` (duplicates kept)."""
    status, letters = api(broker, "GET", f"{P}/{dlq}/letterbox/deadLetters?limit=1000")
    assert status == 200, letters
    return [dl["properties"]["ORIGIN_MESSAGE_ID"] for dl in letters]


def backlog(broker: BrokerProcess, topic: str, sub: str) -> int:
    status, stats = api(broker, "GET", f"{P}/{topic}/stats")
    assert status == 200, stats
    return int(stats["subscriptions"][sub]["msgBacklog"])


def client_for(broker: BrokerProcess) -> pulsar.Client:
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())


def receive_all(consumer: pulsar.Consumer, ack: bool) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=1500)
        except pulsar.Timeout:
            return out
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)


def test_atomic_move_on_a_full_disk(small_fs: Path, broker_factory: Any) -> None:
    data = small_fs / "data"
    broker: BrokerProcess = broker_factory(data)
    client = client_for(broker)
    consumer = client.subscribe(T + "fault-src", "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(T + "fault-src", batching_enabled=False)
    for i in range(N):
        producer.send(f"m{i}".encode())
    held = receive_all(consumer, ack=False)
    ids = sorted(mid(m) for m in held)
    assert len(ids) == N

    def move(msg_id: str) -> tuple[int, Any]:
        body = {"messageId": msg_id, "target": T + "fault-src-s-DLQ", "deadLetterReason": "terminated"}
        return api(broker, "POST", f"{P}/fault-src/subscription/s/letterbox/move", body)

    sent_after = 0  # messages sent once space returned (also in the backlog of `s`)

    def exactly_once() -> set[str]:
        """Every message either unacknowledged in `s` or in the DLQ, exactly once: the moved ids."""
        moved = dead_letter_origins(broker, "fault-src-s-DLQ")
        assert len(moved) == len(set(moved)), f"a message is in the DLQ twice: {moved}"
        assert set(moved) <= set(ids)
        assert backlog(broker, "fault-src", "s") == N - len(moved) + sent_after
        return set(moved)

    status, answer = move(ids[0])
    assert status == 200 and answer["moved"] is True, answer
    assert exactly_once() == {ids[0]}
    filler = fill(small_fs)
    failed = []
    for msg_id in ids[1:]:
        status, answer = move(msg_id)
        assert status in (200, 503), (status, answer)
        if status == 503:
            assert "storage unavailable" in answer["reason"]
            failed.append(msg_id)
    assert failed, "the full disk failed no move: the test did not exercise the fault"
    moved_while_full = exactly_once()
    assert not moved_while_full & set(failed)
    status, reason = api(broker, "GET", HEALTH)
    assert status == 503 and "degraded" in reason["reason"], reason
    assert metric(broker, "letterbox_storage_degraded") == 1
    assert metric(broker, "letterbox_move_storage_failures_total", operation="move") >= len(failed)
    assert sum("Traceback" in line for line in broker.lines) == 0, broker.log()

    os.remove(filler)
    freed = time.monotonic()
    assert wait_until(lambda: healthy(broker), 5.0), "still degraded 5 s after space returned"
    producer.send(b"after")  # the topic takes SENDs again, no restart
    sent_after += 1
    assert time.monotonic() - freed < 5.0
    retried = failed[: len(failed) // 2]
    for msg_id in retried:
        assert move(msg_id)[0] == 200
    assert exactly_once() == moved_while_full | set(retried)
    consumer.close()
    client.close()

    assert broker.stop() == 0, broker.log()
    broker = broker_factory(data)
    client = client_for(broker)
    after_restart = exactly_once()
    assert after_restart == moved_while_full | set(retried)
    consumer = client.subscribe(T + "fault-src", "s", consumer_type=pulsar.ConsumerType.Shared)
    left = {mid(m) for m in receive_all(consumer, ack=True) if m.data() != b"after"}
    assert left == set(ids) - after_restart
    client.close()


def test_redrive_on_a_full_disk(small_fs: Path, broker_factory: Any) -> None:
    data = small_fs / "data"
    broker: BrokerProcess = broker_factory(data)
    client = client_for(broker)
    consumer = client.subscribe(T + "rd-src", "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(T + "rd-src", batching_enabled=False)
    for i in range(N):
        producer.send(f"r{i}".encode())
    for msg in receive_all(consumer, ack=False):
        body = {"messageId": mid(msg), "target": T + "rd-src-s-DLQ", "deadLetterReason": "terminated"}
        assert api(broker, "POST", f"{P}/rd-src/subscription/s/letterbox/move", body)[0] == 200
    consumer.close()
    origins = set(dead_letter_origins(broker, "rd-src-s-DLQ"))
    assert len(origins) == N
    # `back` sees only what a redrive appends to the source topic
    client.subscribe(T + "rd-src", "back", initial_position=pulsar.InitialPosition.Latest).close()

    def exactly_once() -> int:
        """Each dead letter either still in the DLQ or redriven, once: the number redriven."""
        live = dead_letter_origins(broker, "rd-src-s-DLQ")
        assert len(live) == len(set(live)) and set(live) <= origins
        redriven = backlog(broker, "rd-src", "back")
        assert redriven == N - len(live), (redriven, live)
        return redriven

    filler = fill(small_fs)
    status, answer = api(broker, "POST", f"{P}/rd-src-s-DLQ/letterbox/redrive", {})
    assert status == 503 and "storage unavailable" in answer["reason"], (status, answer)
    assert exactly_once() == 0
    assert api(broker, "GET", HEALTH)[0] == 503
    assert metric(broker, "letterbox_move_storage_failures_total", operation="redrive") >= 1

    os.remove(filler)
    assert wait_until(lambda: healthy(broker), 5.0), "still degraded 5 s after space returned"
    assert exactly_once() == 0
    status, answer = api(broker, "POST", f"{P}/rd-src-s-DLQ/letterbox/redrive", {})
    assert status == 200 and answer["moved"] == N, answer
    assert exactly_once() == N
    client.close()

    assert broker.stop() == 0, broker.log()
    broker = broker_factory(data)
    client = client_for(broker)
    assert exactly_once() == N
    back = client.subscribe(T + "rd-src", "back")
    redriven = [m.properties()["ORIGIN_MESSAGE_ID"] for m in receive_all(back, ack=True)]
    assert sorted(redriven) == sorted(origins)
    client.close()


def test_expiry_and_purge_on_a_full_disk(small_fs: Path, broker_factory: Any) -> None:
    """TTL expiry into the dead letter topic, then a purge of it: while the disk is full both
    fail and change nothing; once space returns they complete; a restart keeps the result."""
    data = small_fs / "data"
    broker: BrokerProcess = broker_factory(data)
    client = client_for(broker)
    consumer = client.subscribe(T + "exp-src", "s", properties={"letterbox.dlq.max_redeliveries": "3"})
    producer = client.create_producer(T + "exp-src", batching_enabled=False)
    for i in range(N):
        producer.send(f"x{i}".encode())
    consumer.close()  # the subscription keeps its consumer's dead-letter policy
    expire = f"{P}/exp-src/subscription/s/expireMessages/0"

    filler = fill(small_fs)
    status, answer = api(broker, "POST", expire)
    assert status == 503 and "storage unavailable" in answer["reason"], (status, answer)
    assert backlog(broker, "exp-src", "s") == N
    assert dead_letter_origins(broker, "exp-src-s-DLQ") == []
    os.remove(filler)
    assert wait_until(lambda: healthy(broker), 5.0)
    assert api(broker, "POST", expire)[0] == 204
    expired = dead_letter_origins(broker, "exp-src-s-DLQ")
    assert len(expired) == N == len(set(expired)) and backlog(broker, "exp-src", "s") == 0

    filler = fill(small_fs)
    status, answer = api(broker, "POST", f"{P}/exp-src-s-DLQ/letterbox/purge", {})
    assert status == 503 and "storage unavailable" in answer["reason"], (status, answer)
    assert sorted(dead_letter_origins(broker, "exp-src-s-DLQ")) == sorted(expired)
    assert metric(broker, "letterbox_move_storage_failures_total", operation="purge") >= 1
    os.remove(filler)
    assert wait_until(lambda: healthy(broker), 5.0)
    assert api(broker, "POST", f"{P}/exp-src-s-DLQ/letterbox/purge", {}) == (200, {"purged": N, "dryRun": False})
    client.close()

    assert broker.stop() == 0, broker.log()
    broker = broker_factory(data)
    assert dead_letter_origins(broker, "exp-src-s-DLQ") == []
    assert backlog(broker, "exp-src", "s") == 0


def test_sends_on_a_full_disk_complete_and_the_topic_recovers(small_fs: Path, broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(small_fs / "data")
    client = client_for(broker)
    reader = client.subscribe(T + "full-sends", "all")
    producer = client.create_producer(T + "full-sends", batching_enabled=False, send_timeout_millis=10_000)
    producer.send(b"before")
    filler = fill(small_fs)
    results: dict[int, str] = {}
    done = threading.Event()
    lock = threading.Lock()

    def callback_for(i: int) -> Any:
        def cb(res: pulsar.Result, _msg_id: Any) -> None:
            with lock:
                results[i] = str(res)
                if len(results) == 20:
                    done.set()
        return cb

    started = time.monotonic()
    for i in range(20):
        producer.send_async(f"s{i}".encode(), callback_for(i))
    assert wait_until(lambda: api(broker, "GET", HEALTH)[0] == 503, 10.0), "the full disk was not noticed"
    os.remove(filler)
    freed = time.monotonic()
    # every callback completes, with Ok or an error, within the send timeout (+ margin)
    assert done.wait(10.0 + 5.0), f"callbacks still pending: {sorted(set(range(20)) - set(results))}"
    assert time.monotonic() - started < 10.0 + 5.0
    assert wait_until(lambda: healthy(broker), 5.0)
    fresh = client.create_producer(T + "full-sends", batching_enabled=False)
    fresh.send(b"after")
    assert time.monotonic() - freed < 5.0, "SENDs not accepted within 5 s of space returning"
    got = [m.data() for m in receive_all(reader, ack=True)]
    assert len(got) == len(set(got)), f"a message stored twice: {got}"
    ok = {f"s{i}".encode() for i, r in results.items() if r == "Ok"}
    assert ok <= set(got), f"acknowledged sends lost: {ok - set(got)}"
    assert b"before" in got and b"after" in got
    assert sum("Traceback" in line for line in broker.lines) == 0, broker.log()
    client.close()


def test_sends_during_a_lasting_fault_fail_within_the_send_timeout(small_fs: Path, broker_factory: Any) -> None:
    """The disk stays full longer than the send timeout: every send_async callback gets an
    error within the timeout (the client does not resend forever), nothing is stored, and the
    producer works again once space returns."""
    broker: BrokerProcess = broker_factory(small_fs / "data")
    client = client_for(broker)
    reader = client.subscribe(T + "lasting", "all")
    producer = client.create_producer(T + "lasting", batching_enabled=False, send_timeout_millis=3000)
    producer.send(b"before")
    filler = fill(small_fs)
    results: dict[int, str] = {}
    lock = threading.Lock()

    def callback_for(i: int) -> Any:
        def cb(res: pulsar.Result, _msg_id: Any) -> None:
            with lock:
                results[i] = str(res)
        return cb

    started = time.monotonic()
    for i in range(10):
        producer.send_async(f"l{i}".encode(), callback_for(i))
    assert wait_until(lambda: len(results) == 10, 3.0 + 5.0), f"pending callbacks: {results}"
    assert time.monotonic() - started < 3.0 + 5.0
    assert all(r != "Result.Ok" for r in results.values()), results
    assert api(broker, "GET", HEALTH)[0] == 503
    os.remove(filler)
    assert wait_until(lambda: healthy(broker), 5.0)
    deadline = time.monotonic() + 15.0
    while True:  # the same producer reconnects by itself (client backoff) and sends again
        try:
            producer.send(b"after")
            break
        except pulsar.PulsarException:
            assert time.monotonic() < deadline, "the producer never recovered"
    got = [m.data() for m in receive_all(reader, ack=True)]
    assert got[0] == b"before" and b"after" in got, got
    assert not [d for d in got if d.startswith(b"l")], f"a send that failed was stored: {got}"
    client.close()


@pytest.fixture
def ext4_fs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A loop-mounted 64 MiB ext4 with errors=remount-ro, and its trigger_fs_error switch."""
    if os.geteuid() != 0:
        pytest.skip("the read-only test loop-mounts an ext4 image and needs root")
    image, mnt = tmp_path / "fs.img", tmp_path / "ext4"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 image: {made.stderr.strip()}")
    mounted = subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(mnt)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {mounted.stderr.strip()}")
    try:
        dev = subprocess.run(["findmnt", "-no", "SOURCE", str(mnt)], capture_output=True, text=True)
        trigger = Path("/sys/fs/ext4") / Path(dev.stdout.strip()).name / "trigger_fs_error"
        if not trigger.exists():
            pytest.skip(f"this kernel has no {trigger} to make the file system read-only")
        yield mnt, trigger
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_read_only_data_directory(ext4_fs: tuple[Path, Path]) -> None:
    """The file system under the data directory turns read-only (ext4 errors=remount-ro; a
    plain `mount -o remount,ro` is refused while the broker has its files open): SENDs fail
    with an error, the broker says it is degraded and read-only, admin writes answer 503 with
    the reason, reads keep working. (Recovery needs an fsck and remount: not tested here.)"""
    mnt, trigger = ext4_fs
    broker = BrokerProcess(mnt / "data").start()
    try:
        client = client_for(broker)
        producer = client.create_producer(T + "ro", batching_enabled=False, send_timeout_millis=3000)
        producer.send(b"before")
        trigger.write_text("1")
        with pytest.raises(pulsar.PulsarException):
            producer.send(b"refused")
        assert wait_until(lambda: api(broker, "GET", HEALTH)[0] == 503, 5.0)
        status, answer = api(broker, "GET", HEALTH)
        assert "read-only" in answer["reason"], answer
        status, answer = api(broker, "PUT", "/admin/v2/namespaces/public/ro-ns", {})
        assert status == 503 and "read-only" in answer["reason"], (status, answer)
        assert api(broker, "GET", "/admin/v2/namespaces/public")[0] == 200  # reads keep working
        assert api(broker, "GET", f"{P}/ro/stats")[0] == 200
        assert metric(broker, "letterbox_storage_read_only") == 1
        assert sum("Traceback" in line for line in broker.lines) == 0, broker.log()
        client.close()
    finally:
        broker.kill()
