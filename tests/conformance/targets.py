"""The two brokers a scenario runs against, and the small client-side tools every scenario uses.

Owns `Target` (a broker's name and URLs), the official Python client opened quietly with bounded
operation timeouts, admin REST calls answered as (status, JSON) and a unique topic prefix per run.
A scenario never sees which broker it runs against: it gets a Target and a prefix, and returns a
record (records.py)."""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pulsar


@dataclass(frozen=True)
class Target:
    name: str  # "pulsar" (the reference) or "letterbox"
    service_url: str
    admin_url: str


@dataclass(frozen=True)
class Running:
    """A broker the tests did not start, with the URLs tests/conftest.BrokerProcess offers: for
    tests written against a letterbox process that run here against a Target too."""

    url: str
    admin_url: str


Scenario = Callable[[Target, str], Any]


def new_prefix(client: str) -> str:
    return f"persistent://public/default/conf-{client}-{uuid.uuid4().hex[:10]}"


def _logger() -> logging.Logger:
    lg = logging.getLogger("conformance.pulsar-client")
    lg.setLevel(logging.ERROR)
    return lg


@contextmanager
def client(t: Target, **kwargs: Any) -> Iterator[pulsar.Client]:
    kwargs.setdefault("operation_timeout_seconds", 10)
    c = pulsar.Client(t.service_url, logger=_logger(), **kwargs)
    try:
        yield c
    finally:
        c.close()


def admin(t: Target, method: str, path: str, body: Any = None,
          content_type: str = "application/json") -> tuple[int, Any]:
    """One admin REST call: (HTTP status, parsed JSON body or None, or the text when not JSON)."""
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    req = urllib.request.Request(t.admin_url + path, data=data, method=method,
                                 headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def short(topic: str) -> str:
    """persistent://public/default/x -> x (the path segment the admin API uses)."""
    return topic.removeprefix("persistent://public/default/")


def receive_all(consumer: Any, timeout_ms: int = 3000, limit: int = 1000) -> list[Any]:
    """Every message the consumer gets until it has been quiet for timeout_ms."""
    out: list[Any] = []
    while len(out) < limit:
        try:
            out.append(consumer.receive(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            break
    return out
