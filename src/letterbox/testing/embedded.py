# EmbeddedRunner: a letterbox broker (Standalone) on an asyncio loop in a daemon
# thread of the calling process, its log taken from the `letterbox` logger.
# Only the broker starts with it; its admin HTTP server (and aiohttp, the largest
# import of a broker) starts on first use of admin_port, and the manual clock is
# read and advanced on the broker's own loop (clock()), as the admin API's clock
# routes do it. That keeps a test that needs only the Pulsar port and the clock
# clear of the HTTP stack.
# Invariants: start() returns only once the broker's listener accepts
# connections, or raises with the broker's log; admin_port returns only once the
# admin server accepts them; stop() is idempotent and leaves no thread behind.
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from letterbox.clock import ManualClock
from letterbox.config import BrokerConfig
from letterbox.testing.errors import BrokerStartError

if TYPE_CHECKING:
    from letterbox.standalone import Standalone

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("letterbox")


class LinesHandler(logging.Handler):
    """Keeps every record as a formatted line in `lines`."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n")


class EmbeddedRunner:
    """A broker on a daemon thread of this process."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.port = 0
        self.lines: list[str] = []
        self.timeout = 30.0
        self._admin_port: int | None = None
        self._admin_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._standalone: Standalone | None = None
        self._handler = LinesHandler(self.lines)
        self._old_level = logging.NOTSET

    def start(self, timeout: float) -> None:
        from letterbox.standalone import Standalone, startup_line

        self.timeout = timeout
        self._old_level = log.level
        if log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)
        log.addHandler(self._handler)
        standalone = Standalone(BrokerConfig.load(overrides=self.settings))
        loop = asyncio.new_event_loop()
        started: Future[None] = Future()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(standalone.start(with_admin=False))
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            loop.run_forever()
            loop.close()

        self._loop, self._standalone = loop, standalone
        self._thread = threading.Thread(target=serve, name="letterbox-embedded-broker", daemon=True)
        self._thread.start()
        try:
            started.result(timeout)
        except BaseException as exc:
            self._thread = None
            self._detach()
            raise BrokerStartError(f"the embedded broker did not start: {exc}\n{''.join(self.lines)}") from exc
        self.port = standalone.port
        log.info("letterbox (embedded) %s", startup_line(standalone))

    def _run(self, coro: Any) -> Any:
        """Run a coroutine on the broker's loop and wait for its result."""
        if self._loop is None or self._thread is None:
            raise RuntimeError("the embedded broker is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout)

    @property
    def admin_port(self) -> int:
        """The admin server's port, the server started on first use (0 if it is off)."""
        with self._admin_lock:
            if self._admin_port is None and self._standalone is not None:
                import letterbox.admin  # noqa: F401  # imported here, not on the broker's loop

                standalone = self._standalone
                self._run(standalone.start_admin())
                self._admin_port = standalone.admin_port
                log.info("letterbox (embedded) admin on http://%s:%d (started on first use)",
                         standalone.config.bind, self._admin_port)
            return self._admin_port or 0

    def clock(self, advance_ms: int | None) -> dict[str, Any] | None:
        """The clock's kind and time ({"clock", "nowMs"}), after moving a manual clock on by
        advance_ms if given (a real clock does not move); None on a broker started
        --pulsar-compatible-only, whose clock routes answer 404 as Apache Pulsar would."""
        standalone = self._standalone
        if standalone is None:
            raise RuntimeError("the embedded broker is not running")
        if standalone.config.pulsar_compatible_only:
            return None
        return dict(self._run(_clock_call(standalone, advance_ms)))

    def stop(self) -> None:
        loop, thread, standalone = self._loop, self._thread, self._standalone
        self._thread = None
        if loop is None or thread is None or standalone is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(standalone.stop(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            self._detach()

    def _detach(self) -> None:
        log.removeHandler(self._handler)
        log.setLevel(self._old_level)


async def _clock_call(standalone: Standalone, advance_ms: int | None) -> dict[str, Any]:
    clock = standalone.service.clock
    if advance_ms is not None and isinstance(clock, ManualClock):
        clock.advance(advance_ms)
        await asyncio.sleep(0)  # let the woken timers' first steps run before answering, as the route
    return {"clock": clock.kind, "nowMs": clock.now_ms()}
