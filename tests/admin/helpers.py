"""A tiny urllib client for the admin API: returns (status, parsed JSON or text); and the
few calls the policy tests make again and again (namespace, policy, topic stats, blocked)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def call(base: str, method: str, path: str, body: str | None = None, timeout: float = 10,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """`headers` are sent as given (a Content-Type among them replaces the JSON default)."""
    data = body.encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    text = raw.decode()
    if "json" in ctype and text:
        return status, json.loads(text)
    return status, text


def call_raw(base: str, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body bytes) — for the message endpoints, whose metadata is in headers."""
    req = urllib.request.Request(base + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def metric_total(base: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples on /metrics whose labels include `labels`."""
    status, text = call(base, "GET", "/metrics", timeout=30)
    assert status == 200, text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def make_namespace(base: str, ns: str) -> str:
    """Create `ns` (tenant/namespace) and its tenant if missing; returns its admin path."""
    tenant = ns.split("/")[0]
    call(base, "PUT", f"/admin/v2/tenants/{tenant}", "{}")
    assert call(base, "PUT", f"/admin/v2/namespaces/{ns}")[0] in (204, 409)
    return f"/admin/v2/namespaces/{ns}"


def set_policy(base: str, path: str, body: Any) -> None:
    """POST a policy value (as JSON) to `path`; it must answer 204."""
    status, out = call(base, "POST", path, json.dumps(body))
    assert status == 204, out


def topic_stats(base: str, topic: str) -> Any:
    """The stats document of a persistent topic given as persistent://tenant/ns/name."""
    status, stats = call(base, "GET", "/admin/v2/persistent/" + topic.split("://")[1] + "/stats")
    assert status == 200, stats
    return stats


def subscription_blocked_at(base: str, topic: str, sub: str, unacked: int) -> bool:
    """The subscription is blocked on unacked messages, with exactly `unacked` of them."""
    stats = topic_stats(base, topic)["subscriptions"][sub]
    return bool(stats["blockedSubscriptionOnUnackedMsgs"]) and stats["unackedMessages"] == unacked


def consumer_blocked_at(base: str, topic: str, sub: str, unacked: int) -> bool:
    """The subscription's first consumer is blocked on unacked messages, with exactly `unacked`."""
    stats = topic_stats(base, topic)["subscriptions"][sub]["consumers"][0]
    return bool(stats["blockedConsumerOnUnackedMsgs"]) and stats["unackedMessages"] == unacked
