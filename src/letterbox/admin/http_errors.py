# Error shape of the admin API: every failure is an HTTP status with a JSON
# body {"reason": ...}, as Pulsar's admin REST API returns. Handlers raise
# AdminError (or a letterbox error) and the middleware turns it into a
# response; no handler builds an error response by hand.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from letterbox.errors import InvalidTopicName, LetterboxError, NotAllowed, TopicNotFound
from letterbox.storage.errors import StorageError
from letterbox.storage.health import StorageHealth

log = logging.getLogger("letterbox.admin")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdminError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def error_response(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def no_content() -> web.Response:
    return web.Response(status=204)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except AdminError as exc:
        return error_response(exc.status, exc.reason)
    except InvalidTopicName as exc:
        return error_response(412, str(exc))
    except TopicNotFound as exc:
        return error_response(404, str(exc))
    except NotAllowed as exc:
        return error_response(412, str(exc))
    except LetterboxError as exc:
        return error_response(500, str(exc))
    except StorageError as exc:  # counted and logged where it failed; nothing changed
        return error_response(503, f"storage unavailable, nothing was changed: {exc}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason)
    except Exception as exc:
        log.exception("admin request %s %s failed", request.method, request.path)
        return error_response(500, f"{type(exc).__name__}: {exc}")


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def storage_guard(health: StorageHealth) -> Middleware:
    """While the data directory is read-only, admin writes answer 503 with the reason
    (reads keep working)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if health.read_only and request.method not in READ_METHODS:
            return error_response(503, f"admin writes are refused: {health.describe()}")
        return await handler(request)

    return guard
