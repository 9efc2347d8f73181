# Topics: list in a namespace, create/delete non-partitioned, create/get/
# update/delete partitioned (body = partition count), stats,
# partitioned-stats and internalStats. Partition counts only grow.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import (
    NS_BASE,
    TOPIC_BASE,
    namespace_of,
    partition_count,
    query_flag,
    topic_name,
)
from letterbox.admin.routes_topic_ops import add_subscriptions_to_new_partitions
from letterbox.admin.stats import empty_topic_stats, internal_stats
from letterbox.broker import PARTITIONS_KEY, PersistentTopic, check_new_topic
from letterbox.errors import NotAllowed
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = TopicRoutes(admin)
    router.add_get(NS_BASE, routes.list_topics)
    router.add_get(NS_BASE + "/partitioned", routes.list_partitioned)
    router.add_put(TOPIC_BASE, routes.create_topic)
    router.add_delete(TOPIC_BASE, routes.delete_topic)
    router.add_get(TOPIC_BASE + "/partitions", routes.get_partitions)
    router.add_put(TOPIC_BASE + "/partitions", routes.create_partitioned)
    router.add_post(TOPIC_BASE + "/partitions", routes.update_partitioned)
    router.add_delete(TOPIC_BASE + "/partitions", routes.delete_partitioned)
    router.add_get(TOPIC_BASE + "/stats", routes.topic_stats)
    router.add_get(TOPIC_BASE + "/partitioned-stats", routes.partitioned_stats)
    router.add_get(TOPIC_BASE + "/internalStats", routes.internal_stats)


class TopicRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    async def list_topics(self, request: web.Request) -> web.Response:
        topics = self.admin.namespace_topics(namespace_of(request))
        prefix = request.match_info["domain"] + "://"
        return web.json_response([t for t in topics if t.startswith(prefix)])

    async def list_partitioned(self, request: web.Request) -> web.Response:
        ns = namespace_of(request)
        if not self.admin.namespace_exists(ns) and not self.service.list_topics(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        prefix = f"{PARTITIONS_KEY}{request.match_info['domain']}://{ns}/"
        names = [k[len(PARTITIONS_KEY):] for k, _ in self.service.store.metadata_items(prefix)]
        return web.json_response(names)

    def _check_creatable(self, name: TopicName) -> None:
        self.admin.require_namespace(name.namespace_name)
        if self.service.partitions_of(name) > 0:
            raise AdminError(409, f"Partitioned topic {name} already exists")
        if self.service.topic_exists(name):
            raise AdminError(409, f"This topic already exists: {name}")

    async def create_topic(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        self._check_creatable(name)
        parent = name.partitioned_parent
        if parent != name and self.service.partitions_of(parent) > 0:
            raise AdminError(409, f"{name} is a partition of the partitioned topic {parent}")
        check_new_topic(self.service, name)
        if name.persistent:
            self.service.store.open_ledger(str(name))
        else:
            self.service.get_topic(name)
        await self.service.store.barrier()
        return no_content()

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        force = query_flag(request, "force")
        if self.service.partitions_of(name) > 0:
            raise AdminError(
                409, f"{name} is a partitioned topic; delete it with DELETE .../{name.local}/partitions"
            )
        if not self.service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        try:
            await self.service.delete_topic(name, force=force)
        except NotAllowed as exc:
            raise AdminError(412, f"{exc}; retry with ?force=true to close them") from None
        return no_content()

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        service = self.service
        may_create = query_flag(request, "checkAllowAutoCreation")
        if may_create and service.should_auto_partition(name):
            await service.create_partitioned_topic(name, service.config.default_num_partitions)
        n = service.partitions_of(name)
        if n == 0 and not may_create and not service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")  # a question, as Pulsar's: nothing created
        return web.json_response({"partitions": n, "deleted": False})

    async def create_partitioned(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        count = await partition_count(request)
        if name.partition_index >= 0:
            raise AdminError(412, f"{name} is a partition name; a partitioned topic cannot end in -partition-N")
        self._check_creatable(name)
        await self.service.create_partitioned_topic(name, count)
        self._open_partitions(name, 0, count)
        await self.service.store.barrier()
        return no_content()

    def _open_partitions(self, name: TopicName, start: int, end: int) -> None:
        if name.persistent:
            for i in range(start, end):
                self.service.store.open_ledger(str(name.partition(i)))

    async def update_partitioned(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        count = await partition_count(request)
        current = self.service.partitions_of(name)
        if current == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        if count <= current:
            raise AdminError(422, f"Desired partitions {count} can't be less than the current partitions {current}.")
        await self.service.create_partitioned_topic(name, count)
        self._open_partitions(name, current, count)
        await add_subscriptions_to_new_partitions(self.service, name, current, count)
        await self.service.store.barrier()
        return no_content()

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        force = query_flag(request, "force")
        if self.service.partitions_of(name) == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        try:
            await self.service.delete_partitioned_topic(name, force=force)
        except NotAllowed as exc:
            raise AdminError(412, f"{exc}; retry with ?force=true to close them") from None
        return no_content()

    async def topic_stats(self, request: web.Request) -> web.Response:
        topic = self.admin.existing_topic(topic_name(request))
        stats = self.admin.tracker.topic_stats(topic)
        # Pulsar's TopicStats names the broker that owns the topic by its web address (host:port)
        stats["ownerBroker"] = f"{self.admin.host(request)}:{self.admin.port or self.admin.tls_port}"
        return web.json_response(stats)

    async def partitioned_stats(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        n = self.service.partitions_of(name)
        if n == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts: dict[str, dict[str, Any]] = {}
        for i in range(n):
            part = name.partition(i)
            if self.service.topic_exists(part):
                stats = self.admin.tracker.topic_stats(self.service.get_topic(part, create=False))
            else:
                stats = empty_topic_stats()
            parts[str(part)] = stats
        return web.json_response(self.admin.tracker.partitioned_stats(parts, per_partition))

    async def internal_stats(self, request: web.Request) -> web.Response:
        topic = self.admin.existing_topic(topic_name(request))
        if not isinstance(topic, PersistentTopic):
            raise AdminError(412, "internalStats is only available for persistent topics")
        return web.json_response(internal_stats(topic))
