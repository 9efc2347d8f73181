# A standalone letterbox: the broker (BrokerService) and its admin HTTP server
# started and stopped together. This module sits above both the broker and
# the admin package, so the broker never imports the admin package.
# Invariants: the admin server starts only after the broker listens, and it
# stops before the broker does; a failed admin start stops the broker again.
from __future__ import annotations

import asyncio
import logging
import signal

from letterbox.admin.server import AdminServer
from letterbox.broker.service import BrokerService
from letterbox.config import BrokerConfig

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

    async def start(self) -> None:
        """Start the broker, then the admin HTTP server on config.bind:config.admin_port
        (0 = a free port). If the admin server cannot start, the broker is stopped again."""
        await self.service.start()
        admin = AdminServer(self.service)
        try:
            await admin.start(self.config.bind, self.config.admin_port)
        except OSError:
            await self.service.stop()
            raise
        self.admin = admin

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        await self.service.stop()


async def run(config: BrokerConfig) -> None:
    """Run a standalone broker until SIGINT or SIGTERM."""
    standalone = Standalone(config)
    await standalone.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "letterbox %s listening on pulsar://%s:%d, admin on http://%s:%d, data in %s",
        standalone.service.version,
        config.bind,
        standalone.port,
        config.bind,
        standalone.admin_port,
        config.data_dir.resolve(),
    )
    await stop.wait()
    log.info("shutting down")
    await standalone.stop()
