# The admin HTTP server (aiohttp.web), in the shape of Pulsar's admin REST API
# v2: same paths, methods, JSON field names and status codes (404 unknown,
# 409 already exists, 412/400 with {"reason": ...} for bad input, 405 wrong
# method), plus the HTTP lookup that lets the official clients use
# http://host:<admin port> as their service URL, and Prometheus /metrics.
#
# This module owns the server's lifecycle; what the routes share (lookups of
# tenants, namespaces, existing topics) is AdminContext (admin_context.py),
# which AdminServer extends. The routes live in the routes_*.py modules; each
# exposes register(admin, router) and build_app() registers them all. Every request passes security_middleware (authentication, then the
# route's rule from access_rules.py) before any route sees it.
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from ssl import SSLContext
from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.admin_context import AdminContext
from letterbox.admin.compat_mode import pulsar_compatible_middleware
from letterbox.admin.cross_origin import cross_origin_guard
from letterbox.admin.host_check import host_guard
from letterbox.admin.http_errors import errors_middleware, storage_guard
from letterbox.admin.http_parse_errors import AdminRunner
from letterbox.admin.request_parsing import MAX_BODY_BYTES, validate_names
from letterbox.admin.security_middleware import security_middleware
from letterbox.broker import seed_defaults

if TYPE_CHECKING:
    from letterbox.broker import BrokerService

log = logging.getLogger("letterbox.admin")
SAMPLE_SECONDS = 1.0



class AdminServer(AdminContext):
    def __init__(self, service: BrokerService) -> None:
        super().__init__(service)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------
    def build_app(self) -> web.Application:
        from letterbox.admin import (
            routes_attempts,
            routes_brokers,
            routes_clock,
            routes_cluster,
            routes_compaction,
            routes_dead_letter_values,
            routes_dead_letters,
            routes_failing,
            routes_failure_events,
            routes_messages,
            routes_move,
            routes_namespace_limits,
            routes_namespace_policies,
            routes_permissions,
            routes_poison,
            routes_schemas,
            routes_subscriptions,
            routes_tenants,
            routes_topic_ops,
            routes_topic_policies,
            routes_topics,
        )
        from letterbox.admin.console import routes as console_routes

        app = web.Application(client_max_size=MAX_BODY_BYTES,
                              # credentials before names: a stranger learns nothing
                              middlewares=[errors_middleware,
                                           host_guard(self.service.config),  # DNS rebinding: host_check.py
                                           cross_origin_guard(),  # CSRF: admin/cross_origin.py
                                           pulsar_compatible_middleware(self.service.config.pulsar_compatible_only),
                                           security_middleware(self.service),
                                           validate_names, storage_guard(self.service.store.health)])
        registrars: list[Callable[[AdminContext, web.UrlDispatcher], None]] = [
            routes_cluster.register,
            routes_tenants.register,
            routes_topics.register,
            routes_subscriptions.register,
            routes_messages.register,
            routes_namespace_policies.register,
            routes_permissions.register,
            routes_dead_letters.register,
            routes_failing.register,  # what is failing in a namespace (the console's landing page)
            routes_dead_letter_values.register,  # one dead letter, whole values a listing cut
            routes_failure_events.register,  # a namespace's failure events topic
            routes_clock.register,
            routes_poison.register,
            routes_attempts.register,
            routes_compaction.register,  # topic compaction and compactionThreshold
            routes_schemas.register,  # the schema registry and schemaCompatibilityStrategy
            routes_brokers.register,  # brokers list and version (after routes_cluster's brokers/health)
            routes_namespace_limits.register,  # backlogQuota, max producers/consumers/unacked, ...
            routes_topic_policies.register,  # topic-level policies (win over the namespace's)
            routes_topic_ops.register,  # unload, terminate, lastMessageId, trim, partitioned-internalStats
        ]
        registrars.append(console_routes.register)  # the dead-letter console at / (admin/console/)
        for register in registrars:
            register(self, app.router)
        routes_move.add_move_routes(app, self.service)
        return app

    async def start(
        self, host: str, port: int | None, tls_port: int | None = None, ssl_context: SSLContext | None = None
    ) -> None:
        """Listen on http://host:port and/or https://host:tls_port (None: that one is off)."""
        await self._seed_defaults()
        self._runner = AdminRunner(self.build_app(), access_log=None)  # JSON parse errors: http_parse_errors.py
        await self._runner.setup()
        try:
            if port is not None:
                self.port = await self._listen(web.TCPSite(self._runner, host, port), port)
            if tls_port is not None:
                site = web.TCPSite(self._runner, host, tls_port, ssl_context=ssl_context)
                self.tls_port = await self._listen(site, tls_port)
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        self._sampler = asyncio.ensure_future(self._sample_loop())

    @staticmethod
    async def _listen(site: web.TCPSite, port: int) -> int:
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _sample_loop(self) -> None:
        while True:
            try:
                await self.tracker.sample_sliced()
            except Exception:
                log.exception("stats sampling failed")
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _seed_defaults(self) -> None:
        await seed_defaults(self.service)  # the broker seeded them already; kept for in-process tests
