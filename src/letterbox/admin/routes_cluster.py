# Broker-wide routes: clusters, the HTTP lookup that lets official clients
# use http://host:<admin port> as the service URL, the health check and
# Prometheus /metrics. letterbox is one broker of its own cluster
# (config.cluster_name, always listed, not deletable); other clusters can be
# registered (PUT) as Pulsar lets a cluster know its peers, and are kept in the
# store's metadata under `cluster/`, so tenants may name them.
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.admin_context import CLUSTER_KEY
from letterbox.admin.http_errors import AdminError, error_response, no_content
from letterbox.admin.request_parsing import DOMAIN, json_body, topic_name
from letterbox.admin.topic_lookup import lookup_data

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = ClusterRoutes(admin)
    router.add_get("/admin/v2/clusters", routes.list_clusters)
    router.add_get("/admin/v2/clusters/{cluster}", routes.get_cluster)
    router.add_put("/admin/v2/clusters/{cluster}", routes.create_cluster)
    router.add_post("/admin/v2/clusters/{cluster}", routes.update_cluster)
    router.add_delete("/admin/v2/clusters/{cluster}", routes.delete_cluster)
    router.add_get("/admin/v2/brokers/health", routes.health)
    router.add_get("/metrics", routes.metrics)
    router.add_get("/metrics/", routes.metrics)
    router.add_get("/lookup/v2/topic/" + DOMAIN + "/{tenant}/{namespace}/{topic}", routes.lookup)


class ClusterRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    async def list_clusters(self, request: web.Request) -> web.Response:
        own = self.service.config.cluster_name
        return web.json_response([own, *sorted(c for c in self.admin.registered_clusters() if c != own)])

    async def get_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        if cluster == self.service.config.cluster_name:
            return web.json_response(self._own_urls(request))
        value = self.admin.registered_clusters().get(cluster)
        if value is None:
            raise AdminError(404, f"Cluster {cluster} does not exist")
        return web.json_response(json.loads(value))

    async def create_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        data = _cluster_data(await json_body(request))
        if cluster == self.service.config.cluster_name or cluster in self.admin.registered_clusters():
            raise AdminError(409, f"Cluster {cluster} already exists")
        await self.service.store.put_metadata(CLUSTER_KEY + cluster, json.dumps(data))
        return no_content()

    async def update_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        data = _cluster_data(await json_body(request))
        if cluster == self.service.config.cluster_name:
            raise AdminError(412, f"Cluster {cluster} is this broker's own; its URLs come from its configuration")
        if cluster not in self.admin.registered_clusters():
            raise AdminError(404, f"Cluster {cluster} does not exist")
        await self.service.store.put_metadata(CLUSTER_KEY + cluster, json.dumps(data))
        return no_content()

    async def delete_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        if cluster == self.service.config.cluster_name:
            raise AdminError(412, f"Cluster {cluster} is this broker's own and cannot be deleted")
        if cluster not in self.admin.registered_clusters():
            raise AdminError(404, f"Cluster {cluster} does not exist")
        await self.service.store.put_metadata(CLUSTER_KEY + cluster, None)
        return no_content()

    async def lookup(self, request: web.Request) -> web.Response:
        topic_name(request)
        return web.json_response(lookup_data(self.admin, request, self._own_urls(request)))

    def _own_urls(self, request: web.Request) -> dict[str, str]:
        """This broker's ClusterData URLs; a listener that is off is left out."""
        host = self.admin.host(request)
        urls: dict[str, str] = {}
        if self.admin.port:
            urls["serviceUrl"] = f"http://{host}:{self.admin.port}"
        if self.admin.tls_port:
            urls["serviceUrlTls"] = f"https://{host}:{self.admin.tls_port}"
        if self.service.port:
            urls["brokerServiceUrl"] = f"pulsar://{host}:{self.service.port}"
        if self.service.tls_port:
            urls["brokerServiceUrlTls"] = f"pulsar+ssl://{host}:{self.service.tls_port}"
        return urls

    async def health(self, request: web.Request) -> web.Response:
        """200 "ok", or 503 with the reason while the broker is degraded (storage writes
        fail: disk full, I/O error, read-only data directory)."""
        health = self.service.store.health
        if health.degraded:
            return error_response(503, f"degraded: {health.describe()}")
        return web.Response(text="ok", content_type="text/plain")

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        pieces = await self.admin.metrics.body()
        # written piece by piece (about 256 KiB each, metrics.CHUNK): one 70 MB
        # write, or joining the pieces first, would hold the event loop while it is copied
        resp = web.StreamResponse(headers={"X-Content-Type-Options": "nosniff"})
        resp.content_type, resp.charset = "text/plain", "utf-8"
        resp.content_length = sum(len(p) for p in pieces)
        await resp.prepare(request)
        for piece in pieces:
            await resp.write(piece)
        await resp.write_eof()
        return resp


_URL_FIELDS = ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls")


def _cluster_data(body: Any) -> dict[str, Any]:
    """Pulsar's ClusterData: at least one URL, every URL field a string."""
    if not isinstance(body, dict):
        raise AdminError(400, "Body must be a JSON object of cluster data, e.g. {\"serviceUrl\": \"http://host:8080\"}")
    for key in _URL_FIELDS:
        if key in body and not isinstance(body[key], str):
            raise AdminError(400, f"{key} must be a string")
    if not any(body.get(k) for k in _URL_FIELDS):
        raise AdminError(412, "Cluster data needs a serviceUrl or brokerServiceUrl")
    return body
