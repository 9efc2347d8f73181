# AsyncRetryConsumer: RetryConsumer on the official asyncio client
# (pulsar.asyncio.Client, pulsar-client >= 3.10), with the same configuration,
# decisions, topic names, stamps and counters (retry_core.RetryCore) and the
# same guarantees: every retry and dead-letter is the broker's atomic move,
# awaited over aiohttp (async_broker_moves.py), never a blocking call in the
# event loop.
#
# The asyncio client has no message listener, and one multi-topic consumer
# cannot serve the topic and its retry topic because the retry topic may need
# another subscription type (Shared, so that delays are honoured). So it
# holds two asyncio consumers, and receive() keeps one pending receive per
# consumer and returns whichever completes first; the other stays pending for
# the next call, so no message is dropped and each consumer's receiver queue
# is the flow control. Several tasks may await receive() at once (a worker
# pool): they share the pending receives, and each finished one goes to exactly
# one of them. On a broker without the atomic move (Apache Pulsar)
# moves fall back to produce-then-acknowledge, as RetryConsumer's do.
from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio

from letterbox.auth_options import AuthOptions
from letterbox.client.async_broker_moves import AsyncBrokerMoves
from letterbox.client.broker_moves import DEFAULT_RETRY_SECONDS, BrokerMoveError, Move
from letterbox.client.produce_moves import AsyncProduceMoves, detect_log
from letterbox.client.retry_core import RetryCore, retry_consumer_type
from letterbox.failure import DeadLetterPolicy, DelayLevels, ErrorRule

_CLOSE_WAIT_SECONDS = 5.0
log = logging.getLogger("letterbox.client")


class AsyncRetryConsumer(RetryCore):
    """RetryConsumer for asyncio: `consumer = await AsyncRetryConsumer.create(client, topic,
    subscription_name, **the same keyword arguments as RetryConsumer)`, then
    `await receive()`, `acknowledge`, `negative_acknowledge`, `reconsume_later`,
    `terminate`, `close` (see docs/retry-and-terminate.md)."""

    def __init__(self, core_args: dict[str, Any], move_retry_seconds: float) -> None:
        super().__init__("AsyncRetryConsumer", **core_args)
        self._moves = AsyncBrokerMoves(self.admin_url, auth=self.admin_auth, retry_for=move_retry_seconds)
        self._main: pulsar_asyncio.Consumer | None = None
        self._retry: pulsar_asyncio.Consumer | None = None
        self._pending: dict[pulsar_asyncio.Consumer, asyncio.Task[pulsar.Message]] = {}
        self._fallback: AsyncProduceMoves | None = None
        self._client: pulsar_asyncio.Client | None = None
        self._atomic: bool | None = None

    def _settle(self, atomic: bool | None) -> None:
        self._atomic = atomic
        if atomic is False and self._fallback is None and self._client is not None and self._main is not None:
            self._fallback = AsyncProduceMoves(self._client, self._main.consumer_name())
            detect_log(self.admin_url, self.topic, self.subscription_name)

    async def _atomic_moves(self) -> bool:
        """As RetryConsumer._atomic_moves."""
        if self._atomic is None:
            self._settle(await self._moves.has_atomic_move(self.topic, retry_for=None))
        return self._atomic is not False

    @property
    def atomic_moves(self) -> bool | None:
        """True: the broker's atomic move; False: produce-then-acknowledge; None: not known yet."""
        return self._atomic

    @classmethod
    async def create(
        cls,
        client: pulsar_asyncio.Client,
        topic: str,
        subscription_name: str,
        *,
        consumer_type: pulsar.ConsumerType = pulsar.ConsumerType.Shared,
        enable_retry: bool = True,
        dead_letter_policy: DeadLetterPolicy | None = None,
        delay_levels: DelayLevels | None = None,
        error_classes: Mapping[str, ErrorRule] | None = None,
        admin_url: str | None = None,
        auth_token: str | Callable[[], str] | None = None,
        tls_trust_certs_file_path: str | None = None,
        admin_auth: AuthOptions | None = None,
        move_retry_seconds: float = DEFAULT_RETRY_SECONDS,
        **subscribe_kwargs: Any,
    ) -> AsyncRetryConsumer:
        """Subscribe to `topic` (and its retry topic) and return the consumer."""
        self = cls(dict(
            topic=topic, subscription_name=subscription_name, enable_retry=enable_retry,
            dead_letter_policy=dead_letter_policy, delay_levels=delay_levels, error_classes=error_classes,
            admin_url=admin_url,
            auth_token=auth_token, tls_trust_certs_file_path=tls_trust_certs_file_path,
            admin_auth=admin_auth, subscribe_kwargs=subscribe_kwargs,
        ), move_retry_seconds)
        self._client = client
        # checked before any HTTP session opens: a refused letterbox.* property leaks nothing
        properties = self.subscribe_properties(subscribe_kwargs.pop("properties", None))
        atomic = await self._moves.has_atomic_move(self.topic)  # None: unreachable, asked again later
        try:
            self._main = await client.subscribe(self.topic, subscription_name, consumer_type=consumer_type,
                                                properties=properties, **subscribe_kwargs)
        except BaseException:
            await self._moves.close()  # the probe opened its session
            raise
        if self.retry_topic is not None:
            try:
                self._retry = await client.subscribe(
                    self.retry_topic, subscription_name, consumer_type=retry_consumer_type(consumer_type),
                    properties=properties, **self.retry_subscribe_kwargs(subscribe_kwargs, consumer_type),
                )
            except BaseException:
                await self._main.close()
                await self._moves.close()
                raise
        self._settle(atomic)
        return self

    # --- receiving and acknowledging ------------------------------------------------------
    def _consumers(self) -> list[pulsar_asyncio.Consumer]:
        return [c for c in (self._main, self._retry) if c is not None]

    async def receive(self, timeout_millis: int | None = None) -> pulsar.Message:
        """The next message from the topic or its retry topic; raises pulsar.Timeout."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000
        while True:
            for consumer in self._consumers():
                if consumer not in self._pending:
                    self._pending[consumer] = asyncio.ensure_future(consumer.receive())
            done, _ = await asyncio.wait(
                self._pending.values(), timeout=None if deadline is None else max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            ready = [c for c, task in self._pending.items() if task in done]
            if not ready:
                if not done:
                    raise pulsar.Timeout(f"no message within {timeout_millis} ms")
                continue  # another receive() awaited the same receive and took its message
            consumer = ready[0]
            msg = self._pending.pop(consumer).result()
            worn_out = self.plan_worn_out(msg) if self._fallback is not None else None
            if worn_out is None:
                return msg
            await self._move(msg, worn_out)
            self.count_move(worn_out)

    def _consumer_of(self, msg: pulsar.Message) -> pulsar_asyncio.Consumer:
        if self._main is None:
            raise RuntimeError("AsyncRetryConsumer is made with `await AsyncRetryConsumer.create(...)`")
        return self._retry if self._retry is not None and self.is_retry_message(msg) else self._main

    async def acknowledge(self, msg: pulsar.Message) -> None:
        """Acknowledge `msg` (from the topic or the retry topic)."""
        await self._consumer_of(msg).acknowledge(msg)

    async def negative_acknowledge(self, msg: pulsar.Message, reason: str | None = None, *,
                                   error: BaseException | None = None,
                                   retry_after: timedelta | float | None = None) -> None:
        """Have `msg` redelivered after the negative-ack delay; counts as a delivery. The
        nack, `reason`, `error` and `retry_after` are announced to the broker first (as
        RetryConsumer.negative_acknowledge's)."""
        announcement = self.nack_announcement(msg, reason, error, retry_after)
        try:
            if self._atomic is not False:  # Apache Pulsar takes no announcement: the reason is dropped
                await self._moves.announce(*announcement)
        except BrokerMoveError as exc:
            log.warning("nack of %s not announced (recorded as an ack timeout): %s", msg.message_id(), exc)
        await self._consumer_of(msg).negative_acknowledge(msg)
        self.count_nack()

    # --- retry and terminate ----------------------------------------------------------------
    async def reconsume_later(
        self,
        msg: pulsar.Message,
        delay: timedelta | float | None = None,
        *,
        level: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Retry `msg` later through the retry topic (as RetryConsumer.reconsume_later)."""
        move = self.plan_reconsume(msg, delay, level, properties)
        await self._move(msg, move)
        self.count_move(move)

    async def terminate(self, msg: pulsar.Message, description: str | None = None) -> None:
        """Send `msg` to the dead letter topic now (as RetryConsumer.terminate); raises
        TerminateWithoutDeadLetterPolicy, leaving the message untouched, without a policy."""
        move = self.plan_terminate(msg, description)
        await self._move(msg, move)
        self.count_move(move, terminated=True)

    async def _move(self, msg: pulsar.Message, move: Move) -> None:
        consumer = self._consumer_of(msg)
        if not await self._atomic_moves() and self._fallback is not None:
            await self._fallback.produce(move, msg)
        else:
            await self._moves.move(move)
        await consumer.acknowledge(msg)  # the broker has acknowledged it; this clears the client's tracking

    # --- the rest ----------------------------------------------------------------------------
    async def close(self) -> None:
        await self._shut(unsubscribe=False)

    async def unsubscribe(self) -> None:
        """Remove the subscription from the topic and from its retry topic."""
        await self._shut(unsubscribe=True)

    async def _shut(self, unsubscribe: bool) -> None:
        for consumer in self._consumers():
            await (consumer.unsubscribe() if unsubscribe else consumer.close())
        # A closed consumer fails its pending receive (AlreadyClosed) from a client thread.
        # With pulsar-client 3.13, a process exiting while such a failed receive was still
        # unreleased crashed at exit (SIGSEGV/SIGABRT in 2-4 of 15-30 runs, with the official
        # asyncio consumer alone too); waiting for the failure here and freeing it: 0 of 30.
        pending = list(self._pending.values())
        self._pending.clear()
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_WAIT_SECONDS)
        for task in pending:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved without raising: no traceback cycle through this frame
            else:
                task.cancel()
        del pending
        gc.collect()  # free the failed receives' exception cycles now, not at interpreter exit
        if self._fallback is not None:
            await self._fallback.close()
        await self._moves.close()

    async def __aenter__(self) -> AsyncRetryConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
