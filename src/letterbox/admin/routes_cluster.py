# Broker-wide routes: clusters (letterbox is one cluster of one broker), the
# HTTP lookup that lets official clients use http://host:<admin port> as the
# service URL, the health check and Prometheus /metrics.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.metrics import render_metrics
from letterbox.admin.request_parsing import DOMAIN, topic_name

if TYPE_CHECKING:
    from letterbox.admin.server import AdminServer


def register(admin: AdminServer, router: web.UrlDispatcher) -> None:
    routes = ClusterRoutes(admin)
    router.add_get("/admin/v2/clusters", routes.list_clusters)
    router.add_get("/admin/v2/clusters/{cluster}", routes.get_cluster)
    router.add_get("/admin/v2/brokers/health", routes.health)
    router.add_get("/metrics", routes.metrics)
    router.add_get("/metrics/", routes.metrics)
    router.add_get("/lookup/v2/topic/" + DOMAIN + "/{tenant}/{namespace}/{topic}", routes.lookup)


class ClusterRoutes:
    def __init__(self, admin: AdminServer) -> None:
        self.admin = admin
        self.service = admin.service

    async def list_clusters(self, request: web.Request) -> web.Response:
        return web.json_response([self.service.config.cluster_name])

    async def get_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        if cluster != self.service.config.cluster_name:
            raise AdminError(404, f"Cluster {cluster} does not exist")
        host = self.admin.host(request)
        return web.json_response({
            "serviceUrl": f"http://{host}:{self.admin.port}",
            "brokerServiceUrl": f"pulsar://{host}:{self.service.port}",
        })

    async def lookup(self, request: web.Request) -> web.Response:
        topic_name(request)
        host = self.admin.host(request)
        broker = f"pulsar://{host}:{self.service.port}"
        return web.json_response({
            "brokerUrl": broker,
            "brokerUrlTls": "",
            "httpUrl": f"http://{host}:{self.admin.port}",
            "httpUrlTls": "",
            "nativeUrl": broker,
        })

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok", content_type="text/plain")

    async def metrics(self, request: web.Request) -> web.Response:
        body = render_metrics(self.service, self.admin.tracker)
        return web.Response(text=body, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})
