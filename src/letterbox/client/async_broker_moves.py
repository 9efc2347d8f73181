# The asyncio side of the broker's atomic move (broker_moves.py holds the
# request, the answer and the retry rules; this module only awaits them): an
# aiohttp session posts the move, so the event loop is never blocked by a
# move. A lost response, a refused connection or a 502/503/504 is retried
# with the same exponential backoff for `retry_for` seconds; a refusal
# (4xx, 500) is not retried. The session is made lazily inside the running
# loop and closed by close().
from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from letterbox.auth_options import AuthOptions
from letterbox.client.broker_moves import (
    DEFAULT_RETRY_SECONDS,
    FIRST_BACKOFF,
    HTTP_TIMEOUT,
    MAX_BACKOFF,
    RETRIED_STATUSES,
    BrokerMoveError,
    Move,
    announce_answer,
    announce_request,
    move_answer,
    move_request,
    parse_admin_url,
    probe_path,
    unreachable,
)


class AsyncBrokerMoves:
    """One aiohttp session to one broker's admin API, used from one event loop."""

    def __init__(self, admin_url: str, timeout: float = HTTP_TIMEOUT, auth: AuthOptions | None = None,
                 retry_for: float = DEFAULT_RETRY_SECONDS) -> None:
        parsed = parse_admin_url(admin_url, retry_for)
        self.admin_url = admin_url.rstrip("/")
        self.retry_for = retry_for
        self._auth = auth or AuthOptions()
        self._ssl = self._auth.ssl_context() if parsed.scheme == "https" else None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def move(self, move: Move) -> bool:
        """Perform `move`; True if the message was moved, False if it was already acknowledged."""
        path, body = move_request(move)
        status, payload = await self._post(path, body)
        return move_answer(move, status, payload)

    async def announce(self, topic: str, subscription: str, message_id: str, reason: str | None,
                       extra: Mapping[str, Any] | None = None) -> bool:
        """Announce a nack of `message_id` with `reason` (one try); True if recorded."""
        path, body = announce_request(topic, subscription, message_id, reason, extra)
        status, payload = await self._post(path, body, retry_for=0.0)
        return announce_answer(message_id, status, payload)

    async def has_atomic_move(self, topic: str, retry_for: float | None = 0.0) -> bool | None:
        """A probe of the broker (broker_moves.probe_path): False on Apache Pulsar, None if
        unreachable (with retry_for=None: retried as a move, then BrokerMoveError)."""
        try:
            status, _ = await self._post(probe_path(topic), b"", retry_for=retry_for, method="GET")
        except BrokerMoveError:
            if retry_for is None:
                raise
            return None
        return status != 404

    async def _post(self, path: str, body: bytes, retry_for: float | None = None,
                    method: str = "POST") -> tuple[int, bytes]:
        retry_for = self.retry_for if retry_for is None else retry_for
        deadline = time.monotonic() + retry_for
        backoff = FIRST_BACKOFF
        attempts = 0
        while True:
            attempts += 1
            try:
                headers = {"Content-Type": "application/json", **self._auth.http_headers()}
                async with self._client().request(method, self.admin_url + path,
                                                  data=body if method == "POST" else None, headers=headers,
                                                  ssl=self._ssl if self._ssl is not None else True) as resp:
                    status, payload = resp.status, await resp.read()
                if status not in RETRIED_STATUSES:
                    return status, payload
                problem = f"HTTP {status} {payload[:200]!r}"
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise unreachable(self.admin_url, attempts, retry_for, problem)
            await asyncio.sleep(min(backoff, left))
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
