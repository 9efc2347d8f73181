# The client side of the broker's atomic move (admin extension
# `.../subscription/{sub}/letterbox/move`, docs/admin.md): one HTTP call moves
# a message to the retry or dead letter topic and acknowledges it in the
# subscription in one storage transaction. The call is idempotent (a message
# already acknowledged is not moved again), so a lost response, a refused
# connection or a broker answering 502/503/504 (restarting, storage degraded)
# is retried with exponential backoff (50 ms doubling up to 2 s) for
# `retry_for` seconds (default 30 s, longer than a broker restart) before
# BrokerMoveError is raised. A refusal (4xx, 500) is not retried. The calls carry the
# consumer's admin credentials (AuthOptions: token or basic header, TLS trust
# and client certificate); a 401/403 is not retried. AsyncBrokerMoves
# (async_broker_moves.py) makes the same calls with the same retries on asyncio.
# The same connection announces nacks (`.../letterbox/attempts/{messageId}`,
# with the client's reason) before they are performed: one try, no retries,
# since a nack must not wait for a broker that is away (an announcement that
# failed leaves that nack recorded as an ack timeout).
from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from letterbox.auth_options import AuthOptions
from letterbox.topic_name import TopicName

HTTP_TIMEOUT = 30.0
DEFAULT_RETRY_SECONDS = 30.0  # how long a move is retried while the broker is unreachable
FIRST_BACKOFF, MAX_BACKOFF = 0.05, 2.0
RETRIED_STATUSES = frozenset({502, 503, 504})


class BrokerMoveError(RuntimeError):
    """The broker refused or could not perform a move; the message was not moved."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Move:
    topic: str  # the topic (partition) the message was received from
    subscription: str
    message_id: str  # ledger:entry:partition:batchIndex
    target: str
    properties: Mapping[str, str]
    deliver_after_ms: int = 0
    dead_letter_reason: str | None = None
    description: str | None = None
    initial_subscription: str | None = None


def move_request(move: Move) -> tuple[str, bytes]:
    """The admin path and JSON body of `move` (shared by BrokerMoves and AsyncBrokerMoves)."""
    name = TopicName.parse(move.topic)
    path = f"{name.admin_path}/subscription/{urllib.parse.quote(move.subscription, safe='')}/letterbox/move"
    body = json.dumps({
        "messageId": move.message_id,
        "target": move.target,
        "properties": dict(move.properties),
        "deliverAfterMs": move.deliver_after_ms,
        "deadLetterReason": move.dead_letter_reason,
        "description": move.description,
        "initialSubscription": move.initial_subscription,
    }).encode()
    return path, body


def announce_request(topic: str, subscription: str, message_id: str, reason: str | None,
                     extra: Mapping[str, Any] | None = None) -> tuple[str, bytes]:
    """The admin path and JSON body announcing a nack of `message_id` (with its reason and
    `extra`: the error class fields, failure/error_classes.py)."""
    name = TopicName.parse(topic)
    sub = urllib.parse.quote(subscription, safe="")
    path = f"{name.admin_path}/subscription/{sub}/letterbox/attempts/{urllib.parse.quote(message_id, safe='')}"
    return path, json.dumps({"ending": "nack", "reason": reason, **(extra or {})}).encode()


def probe_path(topic: str) -> str:
    """A letterbox-only GET the topic's consumers may call (the namespace's dead letter topics):
    any answer but 404 means a letterbox broker with the atomic move, 404 an Apache Pulsar
    broker (or letterbox --pulsar-compatible-only), where moves fall back to produce-then-ack."""
    name = TopicName.parse(topic)
    return f"/admin/v2/namespaces/{name.tenant}/{name.namespace}/letterbox/deadLetterTopics"


def announce_answer(message_id: str, status: int, payload: bytes) -> bool:
    """True if the broker took the announcement; BrokerMoveError for a refusal."""
    if status != 200:
        raise BrokerMoveError(f"broker refused the nack announcement of {message_id}: {payload[:200]!r} "
                              f"(HTTP {status})", status)
    try:
        return bool(json.loads(payload).get("announced"))
    except (ValueError, AttributeError):
        return False


def move_answer(move: Move, status: int, payload: bytes) -> bool:
    """True if moved, False if already acknowledged; BrokerMoveError for a refusal."""
    try:
        answer = json.loads(payload) if payload else {}
    except json.JSONDecodeError:
        answer = {}
    if status != 200:
        reason = answer.get("reason") if isinstance(answer, dict) else None
        raise BrokerMoveError(f"broker refused to move {move.message_id} of {move.topic}: "
                              f"{reason or payload[:200]!r} (HTTP {status})", status)
    return bool(answer.get("moved"))


def unreachable(admin_url: str, attempts: int, retry_for: float, problem: str) -> BrokerMoveError:
    """The error raised once a move could not reach the broker for `retry_for` seconds."""
    return BrokerMoveError(f"cannot reach the letterbox admin API at {admin_url} after {attempts} attempts "
                           f"in {retry_for:g} s: {problem}")


def parse_admin_url(admin_url: str, retry_for: float = 0.0) -> urllib.parse.SplitResult:
    """The admin URL's parts, after checking it and the move retry time (sync and asyncio clients)."""
    if not retry_for >= 0:
        raise ValueError(f"retry_for must be >= 0 seconds, got {retry_for!r}")
    parsed = urllib.parse.urlsplit(admin_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"admin_url must look like http://host:8080, got {admin_url!r}")
    return parsed


class BrokerMoves:
    """A keep-alive HTTP connection to one broker's admin API, safe to share across threads."""

    def __init__(self, admin_url: str, timeout: float = HTTP_TIMEOUT, auth: AuthOptions | None = None,
                 retry_for: float = DEFAULT_RETRY_SECONDS) -> None:
        parsed = parse_admin_url(admin_url, retry_for)
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname or ""
        self._port = parsed.port or (443 if self._https else 80)
        self._timeout = timeout
        self.retry_for = retry_for
        self._auth = auth or AuthOptions()
        self._ssl = self._auth.ssl_context() if self._https else None
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self.admin_url = admin_url.rstrip("/")

    def move(self, move: Move) -> bool:
        """Perform `move`; True if the message was moved, False if it was already acknowledged."""
        path, body = move_request(move)
        status, payload = self._post(path, body)
        return move_answer(move, status, payload)

    def announce(self, topic: str, subscription: str, message_id: str, reason: str | None,
                 extra: Mapping[str, Any] | None = None) -> bool:
        """Announce a nack of `message_id` with `reason` (one try); True if recorded."""
        path, body = announce_request(topic, subscription, message_id, reason, extra)
        status, payload = self._post(path, body, retry_for=0.0)
        return announce_answer(message_id, status, payload)

    def has_atomic_move(self, topic: str, retry_for: float | None = 0.0) -> bool | None:
        """A probe of the broker (see probe_path): False on Apache Pulsar, None if unreachable
        (with retry_for=None: retried as a move, then BrokerMoveError)."""
        try:
            status, _ = self._post(probe_path(topic), b"", retry_for=retry_for, method="GET")
        except BrokerMoveError:
            if retry_for is None:
                raise
            return None
        return status != 404

    def _post(self, path: str, body: bytes, retry_for: float | None = None,
              method: str = "POST") -> tuple[int, bytes]:
        """POST (or `method`) until an answer that is not 502/503/504 comes, or retry_for has passed."""
        retry_for = self.retry_for if retry_for is None else retry_for
        deadline = time.monotonic() + retry_for
        backoff = FIRST_BACKOFF
        attempts = 0
        while True:
            attempts += 1
            with self._lock:
                try:
                    conn = self._connection()
                    headers = {"Content-Type": "application/json", **self._auth.http_headers()}
                    conn.request(method, path, body if method == "POST" else None, headers)
                    resp = conn.getresponse()
                    status, payload = resp.status, resp.read()
                    if status not in RETRIED_STATUSES:
                        return status, payload
                    problem = f"HTTP {status} {payload[:200]!r}"
                except (OSError, http.client.HTTPException) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                    self._close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise unreachable(self.admin_url, attempts, retry_for, problem)
            time.sleep(min(backoff, left))
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._ssl
                )
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()
