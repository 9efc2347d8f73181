# pulsar-admin `brokers list CLUSTER` and `brokers version`: GET /admin/v2/brokers/{cluster}
# answers the one broker of this cluster as ["host:webport"] (Pulsar lists the brokers'
# web service addresses), 404 for another or unknown cluster (letterbox knows no
# brokers of a registered remote cluster); GET /admin/v2/brokers/version answers the
# broker's version as plain text, as Apache Pulsar does. (brokers/health is routes_cluster's.)
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox import __version__
from letterbox.admin.http_errors import AdminError

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    async def version(_request: web.Request) -> web.Response:
        return web.Response(text=__version__)

    async def list_brokers(request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        if cluster != admin.service.config.cluster_name:
            if cluster in admin.registered_clusters():
                raise AdminError(404, f"Cluster {cluster} is registered here, but its brokers are not known "
                                      f"to this broker; ask its own admin service")
            raise AdminError(404, f"Cluster {cluster} does not exist")
        port = admin.port or admin.tls_port
        return web.json_response([f"{admin.host(request)}:{port}"])

    router.add_get("/admin/v2/brokers/version", version)
    router.add_get("/admin/v2/brokers/{cluster}", list_brokers)
