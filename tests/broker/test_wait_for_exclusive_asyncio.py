"""WaitForExclusive through pulsar.asyncio (issue 15 item 1, unchanged behaviour): the
producer is granted the topic only once the Exclusive holder closes, then holds it as
Exclusive (a Shared producer beside it gets ProducerBusy, a second Exclusive ProducerFenced)."""
from __future__ import annotations

import asyncio
import uuid

import pulsar
import pulsar.asyncio as pulsar_asyncio

from tests.conftest import BrokerProcess, _quiet_logger

Mode = pulsar.ProducerAccessMode


def test_wait_for_exclusive_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/await-excl-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
        try:
            holder = await client.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False)
            waiting = asyncio.ensure_future(client.create_producer(
                topic, access_mode=Mode.WaitForExclusive, batching_enabled=False))
            done, _ = await asyncio.wait({waiting}, timeout=2.0)
            assert not done, "granted while the Exclusive producer holds the topic"
            await holder.send(b"from-holder")
            await holder.close()
            waiter = await asyncio.wait_for(waiting, 20)
            await waiter.send(b"from-waiter")
            for mode, error in ((Mode.Shared, pulsar.Result.ProducerBusy), (Mode.Exclusive, pulsar.Result.ProducerFenced)):
                try:
                    await client.create_producer(topic, access_mode=mode)
                    got = pulsar.Result.Ok
                except pulsar_asyncio.PulsarException as exc:
                    got = exc.error()
                assert got == error, (mode, got)
            reader = await client.create_reader(topic, pulsar.MessageId.earliest)
            read = [(await asyncio.wait_for(reader.read_next(), 10)).data() for _ in range(2)]
            assert read == [b"from-holder", b"from-waiter"]
            await waiter.close()
        finally:
            await client.close()

    asyncio.run(run())
