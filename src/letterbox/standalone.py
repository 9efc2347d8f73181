# A standalone letterbox: the broker (BrokerService) and its admin HTTP server
# started and stopped together. This module sits above both the broker and
# the admin package, so the broker never imports the admin package.
# The admin package (and aiohttp under it, the largest import of a broker) is
# imported only when an admin server starts: an embedded test broker
# (letterbox.testing) starts its admin server on first use.
# The admin package is imported on a worker thread once the broker listens: the
# binary port serves its first clients meanwhile, and the broker's own start does
# not share the interpreter with that import.
# Invariants: the admin server starts only after the broker listens, and it
# stops before the broker does; a failed admin start stops the broker again.
from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import signal
from typing import TYPE_CHECKING

from letterbox.broker import BrokerService
from letterbox.config import BrokerConfig
from letterbox.security.tls import server_context

if TYPE_CHECKING:
    from letterbox.admin import AdminServer

log = logging.getLogger("letterbox")


class Standalone:
    """One broker plus its admin server, on the addresses of one BrokerConfig."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.service = BrokerService(config)
        self.admin: AdminServer | None = None

    @property
    def port(self) -> int:
        return self.service.port

    @property
    def admin_port(self) -> int:
        return self.admin.port if self.admin is not None else 0

    async def start(self, *, with_admin: bool = True) -> None:
        """Start the broker, then (unless with_admin is false: start_admin() later) the admin
        HTTP server on config.bind:config.admin_port (0 = a free port). If the admin server
        cannot start, the broker is stopped again."""
        await self.service.start()
        if not (with_admin and self._admin_wanted):  # no admin port: the admin package is not loaded
            return
        try:
            await self._import_admin()
            await self.start_admin()
        except BaseException:
            await self.service.stop()
            raise

    @property
    def _admin_wanted(self) -> bool:
        return self.config.admin_port is not None or self.config.web_service_port_tls is not None

    def _import_admin(self) -> asyncio.Future[object]:
        """Import the admin package (aiohttp: the largest import of a broker) on a worker
        thread once the broker listens: the binary port serves its first client meanwhile.
        The import graph has no circles, so the two threads' imports cannot deadlock."""
        return asyncio.get_running_loop().run_in_executor(None, importlib.import_module, "letterbox.admin")

    async def start_admin(self) -> None:
        """Start the admin HTTP server of a started broker (nothing if it runs already)."""
        if self.admin is not None:
            return
        from letterbox.admin import AdminServer  # aiohttp: only where an admin server runs

        admin = AdminServer(self.service)
        cfg = self.config
        if cfg.admin_port is not None or cfg.web_service_port_tls is not None:
            ctx = server_context(cfg) if cfg.web_service_port_tls is not None else None
            await admin.start(cfg.bind, cfg.admin_port, cfg.web_service_port_tls, ctx)
        self.admin = admin

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        await self.service.stop()


def startup_line(standalone: Standalone) -> str:
    """Where the broker listens, where its data is, and whether access is controlled:
    `listening on pulsar://h:p, tls on pulsar+ssl://h:p, admin on http://h:p,
    admin tls on https://h:p, data in DIR; authentication on (token, basic), authorization on`
    (a listener that is off is left out)."""
    cfg = standalone.config
    service = standalone.service
    admin = standalone.admin
    host = cfg.bind if ":" not in cfg.bind else f"[{cfg.bind}]"
    parts = []
    if service.port:
        parts.append(f"listening on pulsar://{host}:{service.port}")
    if service.tls_port:
        parts.append(f"tls on pulsar+ssl://{host}:{service.tls_port}")
    if admin is not None and admin.port:
        parts.append(f"admin on http://{host}:{admin.port}")
    if admin is not None and admin.tls_port:
        parts.append(f"admin tls on https://{host}:{admin.tls_port}")
    parts.append(f"data in {cfg.data_dir.resolve()}")
    auth = service.authentication
    authn = f"authentication on ({', '.join(auth.methods)})" if auth.enabled else "authentication off"
    if auth.enabled and auth.anonymous_role:
        authn += f", anonymous role {auth.anonymous_role!r}"
    authz = "authorization on" if cfg.authorization_enabled else "authorization off"
    clock = "; manual clock (tests only: time moves through POST /admin/v2/letterbox/clock/advance)" \
        if service.clock.manual else ""
    return f"{', '.join(parts)}; {authn}, {authz}{clock}"


# Collector thresholds of a running broker. Every unbatched message allocates a few dozen
# objects and some of them (cached entries, pending acks) live long enough to reach the
# oldest generation, so with Python's defaults (700, 10, 10) full collections walked the
# whole heap every few thousand messages: about 9 of 39 us of broker CPU per message.
# Young collections every 10,000 allocations and a full one at most every 100th middle
# one keep cyclic garbage bounded (reference counting frees everything else at once).
GC_THRESHOLDS = (10_000, 10, 100)


def tune_gc() -> None:
    """Freeze what start-up built (never collected again), set GC_THRESHOLDS and turn the
    collector on (the command line starts a broker with it off)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()


async def run(config: BrokerConfig) -> None:
    """Run a standalone broker until SIGINT or SIGTERM."""
    standalone = Standalone(config)
    await standalone.start()
    tune_gc()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("letterbox %s %s", standalone.service.version, startup_line(standalone))
    if config.pulsar_compatible_only:
        log.info("pulsar-compatible-only: letterbox extensions are off (extension admin routes answer 404, "
                 "letterbox.* consumer properties are ignored, no broker-side dead-letter or backoff policy)")
    await stop.wait()
    log.info("shutting down")
    await standalone.stop()
