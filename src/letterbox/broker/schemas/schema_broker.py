# The broker as the schema registry sees it: a Protocol that service.BrokerService meets,
# so that schemas/ names nothing above it. The registry keeps its versions in the broker's
# metadata store, reads the namespace's compatibility policy, and hands its writes to the
# broker's background work.
from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.policies.bounded import PolicyBroker

if TYPE_CHECKING:
    import asyncio


class SchemaBroker(PolicyBroker, Protocol):
    def track(self, task: asyncio.Future[None]) -> None: ...
    def background(self, coro: Coroutine[Any, Any, None]) -> None: ...
