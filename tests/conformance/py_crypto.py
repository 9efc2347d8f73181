"""Python scenarios: end-to-end encryption passes through the broker untouched. RSA key files are
generated into a temporary directory; a producer encrypts with them; consumers decrypt with the
right key, or have no key and FAIL, DISCARD or CONSUME (the payload stays encrypted)."""
from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pulsar
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest
Action = pulsar.ConsumerCryptoFailureAction


@contextmanager
def _keys() -> Iterator[pulsar.CryptoKeyReader]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with tempfile.TemporaryDirectory() as d:
        pub, priv = Path(d) / "public.pem", Path(d) / "private.pem"
        pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
        priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
        yield pulsar.CryptoKeyReader(str(pub), str(priv))


def _produce(c: pulsar.Client, topic: str, reader: pulsar.CryptoKeyReader, n: int = 2, **kwargs: Any) -> None:
    prod = c.create_producer(topic, encryption_key="conformance-key", crypto_key_reader=reader, **kwargs)
    for i in range(n):
        prod.send(f"secret-{i}".encode(), properties={"i": str(i)})
    prod.close()


def _context(m: Any) -> Any:
    ctx = m.encryption_context()
    if ctx is None:
        return None
    names = [k.key for k in ctx.keys()]  # noqa: SIM118 (an EncryptionContext, not a dict)
    return {"decryption_failed": ctx.is_decryption_failed(), "keys": names,
            "has_param": len(ctx.param()) > 0, "algorithm": ctx.algorithm(),
            "compression": str(ctx.compression_type()), "batch_size": ctx.batch_size(),
            "uncompressed_size": ctx.uncompressed_message_size()}


def _received(cons: Any) -> list[dict[str, Any]]:
    out = []
    for m in receive_all(cons, 2000):
        readable = m.data().startswith(b"secret-")
        out.append({"readable": readable, "data": m.data().decode() if readable else "<encrypted>",
                    "props": dict(m.properties()), "context": _context(m)})
        cons.acknowledge(m)
    return out


@scenario
def crypto_consumer_with_key(t: Target, p: str) -> Any:
    topic = f"{p}-cryptook"
    with _keys() as keys, client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, crypto_key_reader=keys)
        _produce(c, topic, keys)
        got = _received(cons)
        cons.close()
        return got


@scenario
def crypto_without_key_consume(t: Target, p: str) -> Any:
    """ConsumerCryptoFailureAction.CONSUME without a key: the encrypted payload is delivered, the
    encryption context says the decryption failed."""
    topic = f"{p}-cryptoconsume"
    with _keys() as keys, client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, crypto_failure_action=Action.CONSUME)
        _produce(c, topic, keys)
        got = _received(cons)
        cons.close()
        return got


@scenario
def crypto_without_key_fail_then_with_key(t: Target, p: str) -> Any:
    """FAIL (the default) without a key: nothing is delivered; a consumer with the key on the same
    subscription afterwards gets everything."""
    topic = f"{p}-cryptofail"
    with _keys() as keys, client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest)
        _produce(c, topic, keys)
        without = _received(cons)
        cons.close()
        again = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, crypto_key_reader=keys)
        later = [x["data"] for x in _received(again)]
        again.close()
        return {"without_key": without, "with_key": later}


@scenario
def crypto_without_key_discard(t: Target, p: str) -> Any:
    """DISCARD without a key: nothing is delivered, and the messages are gone for the subscription."""
    topic = f"{p}-cryptodiscard"
    with _keys() as keys, client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, crypto_failure_action=Action.DISCARD)
        _produce(c, topic, keys)
        without = _received(cons)
        cons.close()
        again = c.subscribe(topic, "s", crypto_key_reader=keys)
        later = [x["data"] for x in _received(again)]
        again.close()
        return {"without_key": without, "with_key_afterwards": later}


@scenario
def crypto_batched_and_compressed(t: Target, p: str) -> Any:
    """An encrypted LZ4 batch: decrypted with the key; without it (CONSUME) one undecryptable
    message for the whole batch."""
    topic = f"{p}-cryptobatch"
    with _keys() as keys, client(t) as c:
        ok = c.subscribe(topic, "ok", initial_position=Earliest, crypto_key_reader=keys)
        raw = c.subscribe(topic, "raw", initial_position=Earliest, crypto_failure_action=Action.CONSUME)
        prod = c.create_producer(topic, encryption_key="conformance-key", crypto_key_reader=keys,
                                 batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=5000,
                                 compression_type=pulsar.CompressionType.LZ4)
        for i in range(3):
            prod.send_async(f"secret-{i}".encode(), None)
        prod.flush()
        prod.close()
        with_key = [x["data"] for x in _received(ok)]
        without = [{k: v for k, v in x.items() if k != "props"} for x in _received(raw)]
        ok.close()
        raw.close()
        return {"with_key": with_key, "without_key": without}
