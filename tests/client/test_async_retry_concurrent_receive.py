"""AsyncRetryConsumer.receive() awaited by several tasks at once (a worker pool on one
consumer, as the official asyncio consumer allows): each message reaches exactly one
worker and no receive() fails. It used to raise `RuntimeError: coroutine raised
StopIteration` in every receive() but one when they woke on the same finished receive."""
from __future__ import annotations

import asyncio
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio

from letterbox.client import AsyncRetryConsumer, DeadLetterPolicy
from tests.client.test_async_retry_consumer import run
from tests.client.test_retry_consumer import new_topic
from tests.conftest import BrokerProcess

N = 40
WORKERS = 4


def test_concurrent_receives_share_the_messages(broker: BrokerProcess) -> None:
    topic = new_topic("aconc")

    async def body(aclient: pulsar_asyncio.Client) -> tuple[list[bytes], list[str]]:
        consumer = await AsyncRetryConsumer.create(
            aclient, topic, "s", dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3),
            admin_url=broker.admin_url)
        got: list[bytes] = []
        errors: list[str] = []

        async def worker() -> None:
            while len(got) < N:
                try:
                    msg = await consumer.receive(1000)
                except pulsar.Timeout:
                    continue
                except Exception as exc:  # reported by the test
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
                got.append(msg.data())
                await consumer.acknowledge(msg)

        workers = [asyncio.ensure_future(worker()) for _ in range(WORKERS)]
        await asyncio.sleep(0.2)  # every worker is waiting in receive()
        producer = await aclient.create_producer(topic, batching_enabled=False)
        for i in range(N):
            await producer.send(f"m{i}".encode())
        results: Any = await asyncio.wait_for(asyncio.gather(*workers), 60)
        assert results == [None] * WORKERS
        await consumer.close()
        return got, errors

    got, errors = run(broker, body)
    assert errors == []
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(N))
