# The dead-letter console's routes on the admin server: GET / answers the HTML
# shell, GET /console/{file} the static ES modules and CSS shipped in
# static/ (package data). Both are OPEN in access_rules: the files hold no
# data; every piece of data the page shows comes from the protected JSON admin
# API, called by the page with the credentials its login view keeps.
# Invariants: only files directly in static/ with a known suffix are served (the
# route's pattern allows no "/" and no leading dot); every answer carries a
# Content-Security-Policy that allows scripts, styles and connections to this
# origin only (no inline script), and nosniff.
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

STATIC_DIR = Path(__file__).parent / "static"
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
FILE_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
CONSOLE_PATH = "/console/{file:" + FILE_PATTERN + "}"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
    "Referrer-Policy": "no-referrer",
}


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    router.add_get("/", index)
    router.add_get(CONSOLE_PATH, static_file)


def _answer(path: Path) -> web.Response:
    content_type = CONTENT_TYPES.get(path.suffix)
    if content_type is None or not path.is_file():
        raise AdminError(404, f"No console file {path.name}")
    return web.Response(body=path.read_bytes(), content_type=content_type, charset="utf-8", headers=HEADERS)


async def index(request: web.Request) -> web.Response:
    return _answer(STATIC_DIR / "index.html")


async def static_file(request: web.Request) -> web.Response:
    name = request.match_info["file"]
    if name == "index.html":
        raise web.HTTPFound("/")
    return _answer(STATIC_DIR / name)
