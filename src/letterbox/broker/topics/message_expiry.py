# Message TTL (Pulsar's message_ttl_in_seconds namespace policy): a periodic
# check that expires, in every subscription of the loaded persistent topics of
# a namespace with a TTL, the messages published longer ago than the TTL.
# What expiring means is subscription_admin.expire's (the failure core
# decides): dead-lettered with reason "expired" where a dead-letter policy
# applies, acknowledged otherwise (as Pulsar does); dead letter and retry
# topics are left alone by a namespace TTL. Pulsar checks every few minutes; letterbox checks every
# CHECK_SECONDS, so a message outlives its TTL by at most that much (plus the time a
# check takes: one check expires every message then due, however many). Both the
# check period and a message's age are read on the broker's clock (service.clock).
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from letterbox.failure.events import is_failure_events_topic
from letterbox.storage.errors import StorageError

if TYPE_CHECKING:
    from letterbox.broker.topics.topics_broker import TopicsBroker

log = logging.getLogger("letterbox.expiry")
CHECK_SECONDS = 1.0


class MessageExpiryMonitor:
    def __init__(self, service: TopicsBroker) -> None:
        self.service = service
        self._task: asyncio.Task[None] | None = None
        # the clock time at which the last completed check started (0: none yet), so a
        # test on a manual clock can tell that expiry has run at the time it advanced to
        self.checked_at_ms = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self.service.clock.sleep(CHECK_SECONDS)
            started = self.service.clock.now_ms()
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except StorageError:
                pass  # counted and logged by the failed move; retried next check
            except Exception:
                log.exception("message expiry check failed")
            self.checked_at_ms = started

    async def check(self) -> int:
        """One pass over the loaded topics; returns the entries expired."""
        from letterbox.broker.topics.subscription_admin import expire

        policies = self.service.namespace_policies
        expired = 0
        for topic in self.service.loaded_persistent_topics():
            ttl = policies.get(topic.name.namespace_name).ttl_seconds
            if not ttl or ttl <= 0 or is_failure_events_topic(str(topic.name)):  # events keep their own retention
                continue
            for sub in list(topic.subscriptions.values()):
                if sub.durable:
                    n = await expire(sub, ttl, by_namespace_ttl=True)
                    sub.msg_expired += n
                    expired += n
        return expired
