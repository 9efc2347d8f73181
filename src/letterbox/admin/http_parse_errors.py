# Requests the HTTP parser itself refuses (a request line or header longer than
# aiohttp's 8190 bytes, a malformed request line or header) answer like every
# other admin refusal: a JSON {"reason": ...} with the parser's 4xx status,
# and one warning line in the log instead of aiohttp's traceback. The admin
# server runs on AdminRunner, an AppRunner whose connections are handled by
# _JsonErrorHandler (aiohttp has no public hook for these answers: its Server
# builds a RequestHandler per connection, so a Server subclass builds ours).
# Invariants: 5xx answers and everything past parsing are aiohttp's own
# (errors_middleware answers those); the logged line and the reason carry at
# most REASON_CHARS characters of what the client sent.
from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

log = logging.getLogger("letterbox.admin")
REASON_CHARS = 200


class _JsonErrorHandler(RequestHandler):
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        what = " ".join(str(getattr(exc, "message", None) or message or exc or "malformed request").split())
        what = what[:REASON_CHARS]
        log.warning("refused an HTTP request from %s that could not be parsed (%d): %s", request.remote, status, what)
        response = web.json_response({"reason": f"the request could not be read: {what} (an admin URL and "
                                                 "each header must be shorter than 8190 bytes)"}, status=status)
        response.force_close()
        return response


class _JsonErrorServer(Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class AdminRunner(web.AppRunner):
    async def _make_server(self) -> Server:
        made = await super()._make_server()
        kwargs: dict[str, Any] = dict(made._kwargs)
        return _JsonErrorServer(made.request_handler, request_factory=made.request_factory,
                                handler_cancellation=made.handler_cancellation, loop=made._loop, **kwargs)
