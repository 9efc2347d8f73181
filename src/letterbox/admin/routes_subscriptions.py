# Subscription routes of a topic (Pulsar admin v2 paths): list.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.request_parsing import TOPIC_BASE, topic_name

if TYPE_CHECKING:
    from letterbox.admin.server import AdminServer


def register(admin: AdminServer, router: web.UrlDispatcher) -> None:
    routes = SubscriptionRoutes(admin)
    router.add_get(TOPIC_BASE + "/subscriptions", routes.list_subscriptions)


class SubscriptionRoutes:
    def __init__(self, admin: AdminServer) -> None:
        self.admin = admin
        self.service = admin.service

    async def list_subscriptions(self, request: web.Request) -> web.Response:
        topic = self.admin.existing_topic(topic_name(request))
        return web.json_response(sorted(getattr(topic, "subscriptions", {})))
