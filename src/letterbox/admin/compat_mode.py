# --pulsar-compatible-only (config `pulsar_compatible_only`): the broker behaves
# as an Apache Pulsar broker would towards clients and tools, so code written
# against it (letterbox.client's fallback, the Spark source/sink/pipeline) is
# proven to run on a real Pulsar cluster. This module owns the admin side:
# every letterbox extension route (a route pattern with a `letterbox` path
# segment: moves, attempts, dead-letter listing, redrive, poison suspects,
# namespace dead-letter/backoff policies, the test clock) answers 404, as
# Pulsar answers a path it does not have. The broker side (consumer
# properties `letterbox.*` ignored, namespace failure policies off) is in
# broker/connection/handlers_consumer.py and broker/topics/topic.py.
# Invariant: with the setting off, nothing here changes any request.
from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from letterbox.admin.http_errors import error_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_extension_route(pattern: str) -> bool:
    """Whether a route pattern (e.g. `/admin/v2/persistent/{tenant}/{namespace}/{topic}/letterbox/move`)
    is a letterbox-only extension."""
    return "letterbox" in pattern.strip("/").split("/")


def pulsar_compatible_middleware(enabled: bool) -> Middleware:
    """404 for every extension route while `enabled`."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if enabled:
            route = request.match_info.route
            resource = route.resource
            if resource is not None and is_extension_route(resource.canonical):
                return error_response(404, "HTTP 404 Not Found")
        return await handler(request)

    return middleware
