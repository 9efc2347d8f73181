"""One expiry finishes the whole job: POST .../expireMessages/{seconds} and a namespace TTL
check expire EVERY message older than the age before answering (Pulsar's semantics), each
dead-lettered exactly once with reason `expired` where a dead-letter policy applies; with
batching on and off, with and without consumers holding unacknowledged messages. Each
message is judged by its own publish time: messages from producers whose clocks differ
(published out of publish-time order, sent here over a raw socket) neither stop the call
early nor get expired before their time."""
from __future__ import annotations

import os
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.protocol import build_headers_and_payload, client_commands, pb
from tests.admin.helpers import call
from tests.broker.test_robustness import RawConn
from tests.broker.test_storage_faults import fill, small_fs  # noqa: F401 (small_fs: a fixture)
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

NS = "/admin/v2/namespaces/public/default"
P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"
N = 10_000
HOUR_MS = 3600 * 1000
DLQ_PROPS = {"letterbox.dlq.max_redeliveries": "5"}


def _post(base: str, path: str, body: bytes = b"") -> int:
    """POST with a long client timeout: the call answers once the whole backlog is done."""
    req = urllib.request.Request(base + path, data=body, method="POST")
    with urllib.request.urlopen(req, timeout=600) as resp:
        return int(resp.status)


def _backlog(base: str, name: str, sub: str = "sub") -> int:
    status, stats = call(base, "GET", f"{P}/{name}/stats")
    assert status == 200, stats
    return int(stats["subscriptions"][sub]["msgBacklog"])


def _dlq_summary(base: str, dlq: str) -> dict[str, Any]:
    status, topics = call(base, "GET", NS + "/letterbox/deadLetterTopics")
    assert status == 200, topics
    found = [t for t in topics if t["topic"] == T + dlq]
    return found[0] if found else {"messages": 0, "byReason": {}}


def _dead_letters(client: pulsar.Client, dlq: str, expected: int) -> list[bytes]:
    """The payloads of the dead letter topic, in order (a reader from the earliest): exactly
    `expected` of them (fails naming how many arrived if fewer, or if there are more)."""
    reader = client.create_reader(T + dlq, pulsar.MessageId.earliest, receiver_queue_size=2000)
    out: list[bytes] = []
    try:
        while len(out) < expected:
            try:
                msg = reader.read_next(60_000)
            except pulsar.Timeout:
                pytest.fail(f"{dlq}: {len(out)} of {expected} dead letters read, then none for 60 s")
            assert msg.properties()["DEAD_LETTER_REASON"] == "expired", msg.properties()
            out.append(msg.data())
        assert not reader.has_message_available(), f"{dlq} holds more than {expected} dead letters"
    finally:
        reader.close()
    return out


def _produce(client: pulsar.Client, topic: str, payloads: list[bytes], batching: bool) -> None:
    producer = client.create_producer(topic, batching_enabled=batching, block_if_queue_full=True,
                                      batching_max_publish_delay_ms=5)
    for data in payloads:
        producer.send_async(data, None)
    producer.flush()
    producer.close()


@pytest.mark.parametrize("holding", [False, True], ids=["idle", "consumer-holding"])
@pytest.mark.parametrize("dead_letter", [False, True], ids=["ack", "dlq"])
@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_one_call_expires_a_10000_message_backlog(
    broker: BrokerProcess, batching: bool, dead_letter: bool, holding: bool
) -> None:
    base = broker.admin_url
    name = f"expire-all-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        # the subscription keeps its consumer's dead-letter policy after the consumer leaves
        consumer = client.subscribe(T + name, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                    properties=DLQ_PROPS if dead_letter else {},
                                    receiver_queue_size=1000 if holding else 1)
        if not holding:
            consumer.close()
        payloads = [f"m{i}".encode() for i in range(N)]
        _produce(client, T + name, payloads, batching)
        if holding:  # delivered, unacknowledged; the rest of its permits filled meanwhile
            held = [consumer.receive(timeout_millis=30_000) for _ in range(300)]
            assert len(held) == 300
        assert _backlog(base, name) == N

        assert _post(base, f"{P}/{name}/subscription/sub/expireMessages/0") == 204
        # answered: the job is done, not merely started
        assert _backlog(base, name) == 0
        dlq = f"{name}-sub-DLQ"
        if dead_letter:
            assert _dlq_summary(base, dlq)["byReason"] == {"expired": N}
            letters = _dead_letters(client, dlq, N)
            assert len(letters) == N and sorted(letters) == sorted(payloads)  # each exactly once
        else:
            assert _dlq_summary(base, dlq)["messages"] == 0
        # a second call finds nothing left and moves nothing twice
        assert _post(base, f"{P}/{name}/subscription/sub/expireMessages/0") == 204
        assert _backlog(base, name) == 0
        if dead_letter:
            assert _dlq_summary(base, dlq)["byReason"] == {"expired": N}
        if holding:
            consumer.close()
    finally:
        client.close()


def _raw_message(seq: int, payload: bytes, publish_time: int) -> bytes:
    meta = pb.MessageMetadata(producer_name="skewed-host", sequence_id=seq, publish_time=publish_time)
    return build_headers_and_payload(meta, payload)


def _remaining(client: pulsar.Client, name: str, count: int) -> list[bytes]:
    """The messages left in the subscription (received and acknowledged)."""
    consumer = client.subscribe(T + name, "sub", receiver_queue_size=100)
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=30_000)
        out.append(msg.data())
        consumer.acknowledge(msg)
    consumer.close()
    return out


@pytest.mark.parametrize("dead_letter", [False, True], ids=["ack", "dlq"])
def test_publish_times_out_of_entry_order(broker: BrokerProcess, dead_letter: bool) -> None:
    """Producers on hosts whose clocks differ: an hour ahead, two hours behind, interleaved
    with the official client's messages. expireMessages/3600 takes exactly the old ones
    (wherever they sit in the topic), expireMessages/0 everything but the future ones."""
    base = broker.admin_url
    name = f"expire-skew-{uuid.uuid4().hex[:8]}"
    dlq = f"{name}-sub-DLQ"
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    raw = RawConn(broker.port)
    try:
        client.subscribe(T + name, "sub", properties=DLQ_PROPS if dead_letter else {}).close()
        raw.handshake()
        raw.create_producer(T + name, 1, 1)
        fresh: list[bytes] = []
        old: list[bytes] = []
        future: list[bytes] = []
        seq = 0
        # 2,500 fresh in a row: whole blocks of the expiry scan (expiry_scan.BLOCK) with
        # nothing due under the hour, skipped, and old messages on both sides of them
        for block, count in enumerate((500, 2500, 500, 300)):
            batch = [f"fresh-{block}-{i}".encode() for i in range(count)]
            _produce(client, T + name, batch, batching=False)
            fresh += batch
            now = int(time.time() * 1000)
            for kind, at, into in (("old", now - 2 * HOUR_MS, old), ("future", now + HOUR_MS, future)):
                for i in range(3):
                    data = f"{kind}-{block}-{i}".encode()
                    raw.send(client_commands.send(1, seq, 1, _raw_message(seq, data, at)))
                    raw.expect(pb.BaseCommand.SEND_RECEIPT)
                    into.append(data)
                    seq += 1
        total = len(fresh) + len(old) + len(future)
        assert _backlog(base, name) == total

        assert _post(base, f"{P}/{name}/subscription/sub/expireMessages/3600") == 204
        assert _backlog(base, name) == total - len(old)
        if dead_letter:
            assert sorted(_dead_letters(client, dlq, len(old))) == sorted(old)

        assert _post(base, f"{P}/{name}/subscription/sub/expireMessages/0") == 204
        assert _backlog(base, name) == len(future)  # not older than 0 s yet: kept
        if dead_letter:
            assert sorted(_dead_letters(client, dlq, len(old) + len(fresh))) == sorted(old + fresh)
        else:
            assert _dlq_summary(base, dlq)["messages"] == 0
        assert sorted(_remaining(client, name, len(future))) == sorted(future)
    finally:
        raw.close()
        client.close()


MANUAL = ["--clock", "manual", "--allow-test-clock"]


def test_namespace_ttl_expires_everything_due_in_one_check(tmp_path: Path) -> None:
    """10,000 messages past the namespace TTL: the one TTL check that runs after the
    clock advance dead-letters all of them (the clock stands still, so no second check)."""
    b = BrokerProcess(tmp_path / "data", args=MANUAL).start()
    try:
        base = b.admin_url
        assert call(base, "POST", NS + "/messageTTL", "60")[0] == 204
        name = f"ttl-all-{uuid.uuid4().hex[:8]}"
        client = pulsar.Client(b.url, operation_timeout_seconds=30, logger=_quiet_logger())
        client.subscribe(T + name, "sub", properties=DLQ_PROPS).close()
        payloads = [f"t{i}".encode() for i in range(N)]
        _produce(client, T + name, payloads, batching=False)
        published_by = int(time.time() * 1000)  # every publish time is at or before this
        assert _backlog(base, name) == N

        now = int(call(base, "GET", "/admin/v2/letterbox/clock")[1]["nowMs"])
        target = published_by + 60_000 + 1000
        status, body = call(base, "POST", f"/admin/v2/letterbox/clock/advance?ms={target - now}")
        assert status == 200 and body["nowMs"] == target, body
        assert wait_until(lambda: call(base, "GET", "/admin/v2/letterbox/clock")[1]["ttlCheckedAtMs"] == target, 180)
        assert _backlog(base, name) == 0
        assert _dlq_summary(base, f"{name}-sub-DLQ")["byReason"] == {"expired": N}
        letters = _dead_letters(client, f"{name}-sub-DLQ", N)
        assert len(letters) == N and sorted(letters) == sorted(payloads)
        client.close()
    finally:
        assert b.stop() == 0, b.log()


def test_disk_full_in_the_middle_of_a_large_expiry(small_fs: Path, broker_factory: Any) -> None:  # noqa: F811
    """The disk fills up part way through dead-lettering a backlog: the call fails (503)
    with what it moved before the failure moved exactly once and the rest still in the
    subscription; once space returns, a new call finishes the job, nothing moved twice."""
    total, size = 2000, 1000
    b: BrokerProcess = broker_factory(small_fs / "data")
    base = b.admin_url
    client = pulsar.Client(b.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        client.subscribe(T + "full", "sub", properties=DLQ_PROPS).close()
        payloads = [f"{i:05d}".encode() + b"x" * size for i in range(total)]
        _produce(client, T + "full", payloads, batching=False)
        filler = fill(small_fs)  # then give back room for a chunk or two, not for all 2 MB
        os.truncate(filler, max(0, filler.stat().st_size - 1536 * 1024))

        status, answer = call(base, "POST", f"{P}/full/subscription/sub/expireMessages/0")
        left = _backlog(base, "full")
        moved = _dlq_summary(base, "full-sub-DLQ")["byReason"].get("expired", 0)
        assert status == 503 and f"after {moved} entries were expired" in answer["reason"], (status, answer)
        assert 0 < moved < total and moved + left == total, (moved, left)

        os.remove(filler)
        assert wait_until(lambda: call(base, "GET", "/admin/v2/brokers/health")[0] == 200, 10)
        status, answer = call(base, "POST", f"{P}/full/subscription/sub/expireMessages/0")
        assert status == 204, (status, answer, moved)
        assert _backlog(base, "full") == 0
        letters = _dead_letters(client, "full-sub-DLQ", total)
        assert len(letters) == total and sorted(letters) == sorted(payloads)  # each exactly once
    finally:
        client.close()
