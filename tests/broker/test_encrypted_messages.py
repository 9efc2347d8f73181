"""End-to-end encrypted messages through the official client: the broker stores and
dispatches them untouched, so a consumer that cannot decrypt them sees the producer's
encryption context (compression, uncompressed size, batch size) whatever other
subscriptions did with the same entries, as Apache Pulsar 4.0.8 answers (measured with the
same client: FAIL and DISCARD subscriptions first, then CONSUME; 5 for "msg-N" with LZ4)."""
from __future__ import annotations

import uuid
from pathlib import Path

import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

Action = pulsar.ConsumerCryptoFailureAction


@pytest.fixture(scope="module")
def key_reader(tmp_path_factory: pytest.TempPathFactory) -> pulsar.CryptoKeyReader:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    d = tmp_path_factory.mktemp("keys")
    private, public = Path(d / "private.pem"), Path(d / "public.pem")
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return pulsar.CryptoKeyReader(str(public), str(private))


@pytest.mark.parametrize(("batching", "expected"), [(False, [(5, -1)] * 3), (True, [(13, 1), (26, 2)])])
def test_consume_on_failure_sees_the_producers_encryption_context(
        client: pulsar.Client, key_reader: pulsar.CryptoKeyReader, batching: bool,
        expected: list[tuple[int, int]]) -> None:
    topic = f"persistent://public/default/e2e-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic, encryption_key="key", crypto_key_reader=key_reader,
                                      compression_type=pulsar.CompressionType.LZ4, batching_enabled=batching,
                                      batching_max_publish_delay_ms=100)
    producer.send(b"msg-0")
    producer.send_async(b"msg-1", None)
    producer.send_async(b"msg-2", None)
    producer.flush()
    for action in (Action.FAIL, Action.DISCARD):  # neither receives anything
        other = client.subscribe(topic, f"sub-{action}", crypto_failure_action=action,
                                 initial_position=pulsar.InitialPosition.Earliest)
        with pytest.raises(pulsar.Timeout):
            other.receive(1000)
        other.close()
    consumer = client.subscribe(topic, "consume", crypto_failure_action=Action.CONSUME,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = []
    for _ in expected:
        ctx = consumer.receive(10_000).encryption_context()
        assert ctx is not None and ctx.is_decryption_failed()
        assert ctx.compression_type() == pulsar.CompressionType.LZ4
        got.append((ctx.uncompressed_message_size(), ctx.batch_size()))
    assert got == expected
    consumer.close()
    producer.close()
