# Topic operations of pulsar-admin `topics` beyond create/delete/stats:
# unload (close the topic's producers and consumers; the clients reconnect and
# nothing is lost), terminate (and terminate/partitions), lastMessageId, trim
# (apply retention now) and partitioned-internalStats, in Pulsar's admin v2
# shape. Raising a partitioned topic's partition count lives in routes_topics;
# the new partitions get the existing subscriptions through
# add_subscriptions_to_new_partitions below.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import TOPIC_BASE, topic_name
from letterbox.admin.stats import internal_stats
from letterbox.broker import PersistentTopic, topic_termination
from letterbox.storage.position import Position
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker import BrokerService


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = TopicOpsRoutes(admin)
    router.add_put(TOPIC_BASE + "/unload", routes.unload)
    router.add_post(TOPIC_BASE + "/terminate", routes.terminate)
    router.add_post(TOPIC_BASE + "/terminate/partitions", routes.terminate_partitioned)
    router.add_get(TOPIC_BASE + "/lastMessageId", routes.last_message_id)
    router.add_post(TOPIC_BASE + "/trim", routes.trim)
    router.add_get(TOPIC_BASE + "/partitioned-internalStats", routes.partitioned_internal_stats)


def message_id_json(pos: Position, partition: int = -1, batch_size: int = 0) -> dict[str, Any]:
    """Pulsar's MessageIdImpl JSON; a batch's last message id names its index in the batch."""
    return {"ledgerId": pos.ledger_id, "entryId": pos.entry_id, "partitionIndex": partition,
            "batchIndex": batch_size - 1 if batch_size > 1 else -1, "batchSize": batch_size if batch_size > 1 else 0}


async def add_subscriptions_to_new_partitions(service: BrokerService, name: TopicName, start: int, end: int) -> None:
    """After a partitioned topic grew from `start` to `end` partitions: every durable
    subscription of an existing partition is created on the new ones (as Pulsar does),
    from their first message."""
    names: set[str] = set()
    for i in range(start):
        part = name.partition(i)
        if service.topic_exists(part):
            topic = service.get_topic(part, create=False)
            if isinstance(topic, PersistentTopic):
                names.update(n for n, s in topic.subscriptions.items() if s.durable)
    for i in range(start, end):
        topic = service.get_topic(name.partition(i), create=True)
        if not isinstance(topic, PersistentTopic):
            continue
        for sub_name in sorted(names):
            if sub_name not in topic.subscriptions:
                sub = topic.subscription_for(sub_name, True, "earliest", None)
                await sub.cursor.flush()


class TopicOpsRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    def _targets(self, name: TopicName) -> list[TopicName]:
        """A partitioned topic's partitions, else the topic itself (404 when unknown)."""
        n = self.service.partitions_of(name)
        if n > 0:
            return [name.partition(i) for i in range(n)]
        if not self.service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        return [name]

    def _partition_count(self, name: TopicName) -> int:
        """How many partitions the partitioned topic `name` has (404 when it is not one)."""
        n = self.service.partitions_of(name)
        if n == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        return n

    def _persistent(self, name: TopicName, what: str) -> PersistentTopic:
        topic = self.admin.existing_topic(name)
        if not isinstance(topic, PersistentTopic):
            raise AdminError(405, f"{what} is only available for persistent topics; {name} is non-persistent")
        return topic

    async def unload(self, request: web.Request) -> web.Response:
        """Close every producer and consumer of the topic (or of each partition): the official
        clients reconnect at once and go on where they were; nothing stored changes."""
        for part in self._targets(topic_name(request)):
            topic = self.service.topics.get(str(part))
            if topic is not None:
                topic.close_clients()
        return no_content()

    async def terminate(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        if self.service.partitions_of(name) > 0:
            raise AdminError(
                405, f"{name} is a partitioned topic: terminate it with POST .../{name.local}/terminate/partitions"
            )
        topic = self._persistent(name, "Termination")
        last = await topic_termination.terminate(self.service, topic)
        return web.json_response(message_id_json(last, name.partition_index))

    async def terminate_partitioned(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        n = self._partition_count(name)
        out: dict[str, Any] = {}
        for i in range(n):
            topic = self.service.get_topic(name.partition(i), create=True)
            if not isinstance(topic, PersistentTopic):
                raise AdminError(405, f"Termination is only available for persistent topics; {name} is non-persistent")
            out[str(i)] = message_id_json(await topic_termination.terminate(self.service, topic), i)
        return web.json_response(out)

    async def last_message_id(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        topic = self._persistent(name, "lastMessageId")
        last = topic.ledger.last_confirmed
        batch = topic.ledger.messages_between(last.entry_id, last.entry_id) if last.entry_id >= 0 else 0
        return web.json_response(message_id_json(last, name.partition_index, batch))

    async def trim(self, request: web.Request) -> web.Response:
        """Delete now what retention allows: acknowledged entries (by every subscription)
        older or beyond the retention limits. A letterbox topic is one ledger whose
        acknowledged entries are deleted one by one, so trim is the retention pass run now."""
        for part in self._targets(topic_name(request)):
            await self._persistent(part, "Trim").ledger.trim_now()
        return no_content()

    async def partitioned_internal_stats(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        n = self._partition_count(name)
        parts: dict[str, Any] = {}
        for i in range(n):
            part = name.partition(i)
            if self.service.topic_exists(part):
                parts[str(part)] = internal_stats(self._persistent(part, "internalStats"))
        return web.json_response({"metadata": {"partitions": n, "deleted": False}, "partitions": parts})
