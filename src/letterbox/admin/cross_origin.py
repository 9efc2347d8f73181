# Cross-origin writes refused (CSRF): the console (console/routes.py) puts a
# browser on the admin origin, and a page on ANOTHER origin can make that
# browser send "simple" requests -- a POST with a text/plain body, or none --
# without any CORS preflight, carrying whatever the browser holds for the admin
# origin (nothing is needed with authentication off; a Basic login cached after
# the 401 challenge; a client certificate). So a request that changes anything
# (any method but GET, HEAD, OPTIONS) is refused with 403 when the browser marks
# it as coming from another origin: an Origin header that names another host
# (or "null": a sandboxed page) than the request's Host (or X-Forwarded-Host,
# behind a reverse proxy), or Sec-Fetch-Site: cross-site.
# Invariants: same-origin calls (the console's own) and clients that send no
# Origin (the CLI, pulsar-admin, curl, the official clients) are never refused;
# reads are not affected (a browser does not let the other origin read the answer
# without CORS headers, which this server never sends).
from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web

from letterbox.admin.http_errors import Handler, error_response

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

READS = frozenset({"GET", "HEAD", "OPTIONS"})


def foreign_origin(request: web.Request) -> str | None:
    """The other origin a browser says this request comes from, or None."""
    if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
        return request.headers.get("Origin") or "another site (Sec-Fetch-Site: cross-site)"
    origin = request.headers.get("Origin")
    if origin is None:
        return None
    netloc = urlsplit(origin.strip()).netloc.lower() if "://" in origin else ""
    # behind a reverse proxy the browser's host arrives as X-Forwarded-Host (a header a
    # cross-site page cannot set without a preflight)
    ours = {request.host.lower(), *(h.strip().lower() for h in
                                     request.headers.get("X-Forwarded-Host", "").split(",") if h.strip())}
    if not netloc or netloc not in ours:
        return origin[:100]
    return None


def cross_origin_guard() -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in READS:
            other = foreign_origin(request)
            if other is not None:
                return error_response(403, f"cross-origin request refused: a page of {other!r} may not "
                                           f"{request.method} to this admin API (use the console served "
                                           "here, or a client that sends no Origin)")
        return await handler(request)

    return guard
