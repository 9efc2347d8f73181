"""A client's counts and sizes are never trusted: a SEND whose num_messages does
not match the payload, or whose payload would expand beyond max_message_size
(a decompression bomb), gets a SEND_ERROR naming the field and stores nothing
(code ChecksumError, the one the official clients handle per message);
the connection and every other client carry on; FLOW permits stay in range.

Raw-socket cases speak our own codec; the consumers are official clients.
"""
from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Iterator

import cramjam
import pulsar
import pytest

from letterbox.errors import ServerError
from letterbox.protocol import build_batch_payload, build_headers_and_payload, client_commands, pb
from letterbox.protocol.compression import ZSTD
from tests.broker import test_robustness as robustness
from tests.broker.test_robustness import RawConn, topic_name
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

T = pb.BaseCommand
# the raw-socket fixtures: a raw connection, checked afterwards that others were unaffected
survivor = robustness.survivor
others_unaffected = robustness.others_unaffected
raw = robustness.raw
GIB = 1 << 30


def zstd_bomb(size: int = GIB) -> bytes:
    """`size` zero bytes as one zstd frame (about 33 KB for 1 GiB), built in 1 MiB steps."""
    c = cramjam.zstd.Compressor(level=3)
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        c.compress(chunk)
    return bytes(c.finish())


def message(seq: int, payload: bytes, **fields: object) -> bytes:
    meta = pb.MessageMetadata(producer_name="untrusted", sequence_id=seq, publish_time=int(time.time() * 1000))
    for name, value in fields.items():
        setattr(meta, name, value)
    return build_headers_and_payload(meta, payload)


def batch(seq: int, bodies: list[bytes], declared: int | None = None) -> bytes:
    payload = build_batch_payload((pb.SingleMessageMetadata(), b) for b in bodies)
    return message(seq, payload, num_messages_in_batch=len(bodies) if declared is None else declared)


@pytest.fixture
def official(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    yield c
    c.close()


def refused(conn: RawConn, seq: int, field: str) -> str:
    err = conn.expect(T.SEND_ERROR).command.send_error
    assert err.sequence_id == seq
    # ChecksumError: the code on which official clients fail just this message (see handlers_producer)
    assert err.error == ServerError.ChecksumError, err
    assert err.message.startswith("message refused: "), err.message
    assert field in err.message, err.message
    return err.message


def receive_all(consumer: pulsar.Consumer, expected: list[bytes]) -> None:
    got = []
    for _ in expected:
        msg = consumer.receive(timeout_millis=10_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == expected
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)


@pytest.mark.parametrize("num", [2**31 - 1, 0, -1, 2])
def test_num_messages_that_does_not_match_the_payload_is_refused(
    raw: RawConn, official: pulsar.Client, num: int
) -> None:
    topic = topic_name("count")
    consumer = official.subscribe(topic, "watcher", consumer_type=pulsar.ConsumerType.Shared)
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(client_commands.send(1, 0, num, message(0, b"lying count")))
    text = refused(raw, 0, "num_messages")
    assert str(num) in text
    # the same connection publishes a correct message, the official producer too,
    # and the consumer gets exactly those two (nothing of the refused one, permits intact)
    raw.send(client_commands.send(1, 1, 1, message(1, b"after-refusal")))
    raw.expect(T.SEND_RECEIPT)
    producer = official.create_producer(topic, batching_enabled=False)
    producer.send(b"official")
    receive_all(consumer, [b"after-refusal", b"official"])


def test_batch_counts_must_match_the_entries_in_the_payload(raw: RawConn, official: pulsar.Client) -> None:
    topic = topic_name("batch-count")
    consumer = official.subscribe(topic, "watcher")
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    # metadata and SEND agree on 3, the payload holds 2
    raw.send(client_commands.send(1, 0, 3, batch(0, [b"a", b"b"], declared=3)))
    refused(raw, 0, "num_messages")
    # SEND says 2, metadata says 3
    raw.send(client_commands.send(1, 1, 2, batch(1, [b"a", b"b", b"c"])))
    refused(raw, 1, "num_messages_in_batch")
    # a payload with more entries than declared
    raw.send(client_commands.send(1, 2, 1, batch(2, [b"a", b"b"], declared=1)))
    refused(raw, 2, "num_messages")
    # a true batch is stored and delivered whole
    raw.send(client_commands.send(1, 3, 3, batch(3, [b"x", b"y", b"z"])))
    raw.expect(T.SEND_RECEIPT)
    receive_all(consumer, [b"x", b"y", b"z"])


def test_zstd_bomb_declared_as_one_gib_is_refused_at_send(raw: RawConn, official: pulsar.Client) -> None:
    topic = topic_name("bomb")
    consumer = official.subscribe(topic, "watcher")
    bomb = zstd_bomb()
    assert len(bomb) < 64 * 1024
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(client_commands.send(1, 0, 1, message(0, bomb, compression=ZSTD, uncompressed_size=GIB)))
    assert "exceeds the maximum message size" in refused(raw, 0, "uncompressed_size")
    # declared small, really 1 GiB: refused once it expands past what it declared
    raw.send(client_commands.send(1, 1, 1, message(1, bomb, compression=ZSTD, uncompressed_size=1000)))
    assert "expands beyond 1000 bytes" in refused(raw, 1, "uncompressed_size")
    # garbage that is not zstd at all
    raw.send(client_commands.send(1, 2, 1, message(2, b"not zstd", compression=ZSTD, uncompressed_size=10)))
    refused(raw, 2, "ZSTD")
    # a real compressed message is stored and reaches the consumer decompressed
    body = b"compressed and honest " * 100
    ok = message(3, bytes(cramjam.zstd.compress(body)), compression=ZSTD, uncompressed_size=len(body))
    raw.send(client_commands.send(1, 3, 1, ok))
    raw.expect(T.SEND_RECEIPT)
    receive_all(consumer, [body])


def test_large_compressed_sends_checked_off_loop_keep_their_order(raw: RawConn, official: pulsar.Client) -> None:
    """Payloads past the off-loop threshold are checked in a worker thread; small SENDs
    behind them still get stored and receipted in send order."""
    topic = topic_name("order")
    consumer = official.subscribe(topic, "watcher")
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    big = b"B" * (1 << 20)
    frames = []
    expected = []
    for seq in range(6):
        body = big + bytes([seq]) if seq % 2 == 0 else b"small-%d" % seq
        expected.append(body)
        frames.append(client_commands.send(
            1, seq, 1, message(seq, bytes(cramjam.zstd.compress(body)), compression=ZSTD, uncompressed_size=len(body))
        ))
    raw.send(b"".join(frames))
    seqs = [raw.expect(T.SEND_RECEIPT).command.send_receipt.sequence_id for _ in range(6)]
    assert seqs == list(range(6))
    receive_all(consumer, expected)


def test_flow_with_a_huge_count_keeps_permits_in_range(broker: BrokerProcess, raw: RawConn) -> None:
    topic = topic_name("flow")
    raw.handshake()
    raw.send(client_commands.subscribe(topic, "flood", consumer_id=5, request_id=1))
    raw.expect(T.SUCCESS)
    for _ in range(3):
        raw.send(client_commands.flow(5, 2**32 - 1))
    stats_url = f"{broker.admin_url}/admin/v2/persistent/{topic.split('://')[1]}/stats"

    def permits() -> int:
        with urllib.request.urlopen(stats_url, timeout=10) as resp:
            consumers = json.loads(resp.read())["subscriptions"]["flood"]["consumers"]
        return int(consumers[0]["availablePermits"])

    assert wait_until(lambda: permits() == 2**31 - 1), permits()


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZSTD", "SNAPPY"])  # the Python client has no ZLIB
def test_official_client_batches_and_chunks_pass_the_checks(official: pulsar.Client, codec: str) -> None:
    """What the official client sends is never refused: compressed batches (each
    entry counted after decompression) and chunks of a message larger than
    max_message_size (opaque slices, declared size above the limit)."""
    compression = getattr(pulsar.CompressionType, codec)
    topic = topic_name(f"official-{codec.lower()}")
    consumer = official.subscribe(topic, "watcher")
    batched = official.create_producer(topic, compression_type=compression, batching_enabled=True,
                                       batching_max_publish_delay_ms=50)
    bodies = [b"batched-%d-" % i * 20 for i in range(200)]
    for body in bodies:
        batched.send_async(body, None)
    batched.flush()
    chunked = official.create_producer(topic, compression_type=compression, batching_enabled=False,
                                       chunking_enabled=True)
    big = random.Random(7).randbytes(6 * 1024 * 1024)  # incompressible, over 5 MiB: sent in chunks
    chunked.send(big)
    got = [consumer.receive(timeout_millis=20_000).data() for _ in range(201)]
    assert got[:200] == bodies and got[200] == big


def test_official_client_message_expanding_past_the_limit_fails_alone(official: pulsar.Client) -> None:
    """6 MiB that compress to a few KB fit a frame but expand past max_message_size: the
    official client's send fails (no reconnect-and-resend loop) and its next send works."""
    topic = topic_name("expands")
    consumer = official.subscribe(topic, "watcher")
    producer = official.create_producer(topic, compression_type=pulsar.CompressionType.ZSTD,
                                        batching_enabled=False, send_timeout_millis=20_000)
    started = time.monotonic()
    with pytest.raises(pulsar.ChecksumError):
        producer.send(bytes(6 * 1024 * 1024))
    assert time.monotonic() - started < 15
    producer.send(b"next one")
    receive_all(consumer, [b"next one"])
