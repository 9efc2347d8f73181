"""The fault-injection consumer process of tests/client/retry_worker.py on asyncio:
AsyncRetryConsumer retries every message with reconsume_later until the dead letter policy
takes it, and the process kills itself (os._exit) at random before a move, and after a move
but before the client's own acknowledgement."""
from __future__ import annotations

import asyncio
import os
import random
import sys

import pulsar
import pulsar.asyncio as pulsar_asyncio

from letterbox.client import AsyncRetryConsumer, DeadLetterPolicy, DelayLevels
from letterbox.client.async_broker_moves import AsyncBrokerMoves
from letterbox.client.broker_moves import Move
from tests.client.retry_worker import CRASH_PROBABILITY


async def main() -> None:
    service_url, admin_url, topic, seed = sys.argv[1:5]
    rng = random.Random(int(seed))
    real_move = AsyncBrokerMoves.move

    async def crashing_move(self: AsyncBrokerMoves, move: Move) -> bool:
        if rng.random() < CRASH_PROBABILITY:
            os._exit(3)  # died before the move: the message must come back
        moved = await real_move(self, move)
        if rng.random() < CRASH_PROBABILITY:
            os._exit(4)  # died after the move, before the client's ack: nothing may be moved twice
        return moved

    AsyncBrokerMoves.move = crashing_move  # type: ignore[method-assign]
    client = pulsar_asyncio.Client(service_url, operation_timeout_seconds=10,
                                   logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = await AsyncRetryConsumer.create(
        client, topic, "work", admin_url=admin_url, delay_levels=DelayLevels("20ms 40ms"),
        dead_letter_policy=DeadLetterPolicy(max_redeliver_count=2),
        receiver_queue_size=50, initial_position=pulsar.InitialPosition.Earliest)
    while True:
        try:
            msg = await consumer.receive(3000)
        except pulsar.Timeout:
            break
        await consumer.reconsume_later(msg)
    await consumer.close()
    # Not `await client.close()`: in pulsar-client 3.13 the C++ ClientImpl::handleClose runs
    # the close callback on a detached std::thread, which still calls into and then releases
    # the Python callback after the awaited future is resolved. This process then exits, and
    # that thread races Py_FinalizeEx: SIGSEGV (tupledealloc in pybind11's func_wrapper while
    # the final gc runs) or SIGABRT ("terminate called without an active exception":
    # pthread_exit from take_gil unwinding the callback's noexcept destructor), 11 of 80 clean
    # exits under load, cores read with gdb. shutdown() does the same teardown (connections,
    # executors) synchronously in this thread with no Python callback: 0 crashes in 200 runs.
    # The consumers are closed above, so nothing is left for close() to close gracefully.
    client.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
