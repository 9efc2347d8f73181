"""Admin fuzz test: hundreds of generated bad requests over every route of the
admin app's route table (hostile names, bad path integers, malformed,
non-UTF-8, deeply nested, non-finite and huge-number JSON bodies, invalid
percent-encoding). Each gets a 4xx with a JSON reason, none hangs, and the
stored data are the same afterwards. Seeded, so a failure repeats."""
from __future__ import annotations

import http.client
import json
import random
import re
import time
from typing import Any
from unittest.mock import MagicMock

import pulsar

from letterbox.admin.server import AdminServer
from tests.admin.helpers import call
from tests.conftest import _quiet_logger, wait_until

SEED = 20261123
VALID = {"domain": "persistent", "tenant": "fz", "namespace": "ns", "topic": "t", "subscription": "s",
         "cluster": "standalone", "role": "alice", "n": "1", "seconds": "0", "timestamp": "0",
         "ledgerId": "0", "entryId": "0", "messageId": "0:0:-1:-1", "taskId": "0123456789abcdef",
         "file": "app.js", "version": "0"}
NAME_VARS = ("tenant", "namespace", "topic", "subscription", "cluster", "role")
INT_VARS = ("n", "seconds", "timestamp", "ledgerId", "entryId")
# names as they appear in the URL (already percent-encoded where needed)
HOSTILE_NAMES = [
    "..", "a..b", "%2E%2E", "a%00b", "%00", "a%0Ab", "a%0D%0Ab", "%09x", "x%7F", "%C2%85", "a%2Fb",
    "%2F..%2F..%2Fetc", "%zz", "a%2", "%", "%E9", "%C3", "%ED%A0%80", "x" * 1100, "%20lead", "trail%20",
    "..%2F..",
]
HOSTILE_INTS = ["-1", "1e999", "9" * 40, "-" + "9" * 40, "NaN", "Infinity", "abc", "%zz", "0x10", "1.5", "%00"]
HOSTILE_QUERIES = ["x=%zz", "limit=%", "force=%E9", "a=%C3"]
# bodies every JSON-reading route refuses before it looks at a field
HOSTILE_BODIES: list[bytes] = [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b"\xff\xfe\x00{",
    b'{"minDelayMs": "\xe9"}',
    b"Infinity", b"-Infinity", b"NaN", b'{"minDelayMs": NaN}', b'{"ratePerSecond": Infinity}',
    b"1e999", b'{"maxRedeliverCount": 1e400}', b"1" + b"0" * 30, b'{"minDelayMs": ' + b"9" * 5000 + b"}",
    b'{"minDelayMs": 1000000000000000000000000000000}', b'"\\ud800"', b'{"\\udfff": 1}',
    b"{nope", b"[1,", b"\x00",
    b" " * (1024 * 1024 + 10),
]
# routes that read a JSON body (method, path suffix after the route's names)
JSON_ROUTES = re.compile(
    r"^(PUT|POST) (/admin/v2/(clusters|tenants)/\{\w+\}"
    r"|/admin/v2/namespaces/\{tenant\}/\{namespace\}(/(deduplication|retention|messageTTL|letterbox/\w+"
    r"|permissions/\{role\}|permissions/subscription/\{subscription\}))?"
    r"|/admin/v2/\{domain\}/.*/(partitions|subscription/\{subscription\}|resetcursor|letterbox/(redrive|purge|move)"
    r"|letterbox/attempts/\{messageId\}"
    r"|permissions/\{role\}))$"
)
# well-formed JSON a field check must refuse (wrong type / out of range) on these routes
FIELD_BODIES = {
    "letterbox/redrive": ['{"properties": []}', '{"properties": 0}', '{"ratePerSecond": 1e-6}',
                          '{"ratePerSecond": 100001}', '{"target": "persistent://nowhere/ns/t"}',
                          '{"target": "persistent://fz/ns/../x"}', '{"maxMessages": 0}'],
    "letterbox/purge": ['{"properties": []}', '{"properties": 0}', '{"reason": 5}'],
    "letterbox/redeliveryBackoff": ['{"minDelayMs": 864000001}', '{"minDelayMs": 0}',
                                    '{"minDelayMs": 10, "multiplier": 1e308}'],
    "letterbox/deadLetterPolicy": ['{"maxRedeliverCount": 2147483648}',
                                   '{"maxRedeliverCount": 1, "initialSubscriptionName": "a\\u0000b"}'],
    "messageTTL": ["2147483648", "-1", "1.5"],
    "letterbox/move": ['{"messageId": "1:' + "9" * 30 + '", "target": "persistent://fz/ns/x"}',
                       '{"messageId": "0:0", "target": "persistent://fz/ns/..", "deliverAfterMs": 1}'],
    "letterbox/attempts/{messageId}": ['{"ending": "ack"}', '{"ending": "nack", "reason": 5}',
                                       '{"ending": "nack", "why": "x"}', '{"reason": "' + "x" * 1001 + '"}'],
}


def _routes() -> list[tuple[str, str]]:
    app = AdminServer(MagicMock()).build_app()
    out = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}
    return sorted(m for m in out if m[0] != "HEAD")


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


def _requests(rng: random.Random) -> list[tuple[str, str, bytes | None]]:
    out: list[tuple[str, str, bytes | None]] = []
    for method, template in _routes():
        variables = re.findall(r"\{(\w+)\}", template)
        for _ in range(3):  # hostile query string: refused on every route
            path = _fill(template, VALID) + "?" + rng.choice(HOSTILE_QUERIES)
            out.append((method, path, None))
        for var in (v for v in variables if v in NAME_VARS):
            for name in rng.sample(HOSTILE_NAMES, 4):
                out.append((method, _fill(template, {**VALID, var: name}), None))
        for var in (v for v in variables if v in INT_VARS):
            for value in rng.sample(HOSTILE_INTS, 3):
                out.append((method, _fill(template, {**VALID, var: value}), None))
        if JSON_ROUTES.match(f"{method} {template}"):
            for body in rng.sample(HOSTILE_BODIES, 5):
                out.append((method, _fill(template, VALID), body))
            for suffix, bodies in FIELD_BODIES.items():
                if method == "POST" and template.endswith(suffix):
                    path = _fill(template, {**VALID, "topic": "t-s-DLQ"} if "redrive" in suffix or
                                 "purge" in suffix else VALID)
                    out.extend((method, path, b.encode()) for b in bodies)
    rng.shuffle(out)
    return out


def _send(port: int, method: str, path: str, body: bytes | None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def _snapshot(base: str) -> dict[str, Any]:
    snap: dict[str, Any] = {"clusters": call(base, "GET", "/admin/v2/clusters")}
    tenants = call(base, "GET", "/admin/v2/tenants")[1]
    snap["tenants"] = tenants
    for tenant in tenants:
        snap[tenant] = call(base, "GET", f"/admin/v2/tenants/{tenant}")
        for ns in call(base, "GET", f"/admin/v2/namespaces/{tenant}")[1]:
            snap[ns] = call(base, "GET", f"/admin/v2/namespaces/{ns}")
            topics = call(base, "GET", f"/admin/v2/namespaces/{ns}/topics")[1]
            snap[ns + " topics"] = topics
            snap[ns + " partitioned"] = call(base, "GET", f"/admin/v2/persistent/{ns}/partitioned")
            for topic in topics:
                path = "/admin/v2/" + topic.replace("://", "/")
                # entries added (not entries kept: retention trims acknowledged ones in the
                # background), each cursor's position, each subscription's backlog
                status, stats = call(base, "GET", path + "/internalStats")
                snap[topic] = (status, stats.get("entriesAddedCounter"), stats.get("lastConfirmedEntry"), {
                    c: (v["markDeletePosition"], v["individuallyDeletedMessages"])
                    for c, v in stats.get("cursors", {}).items()})
                status, stats = call(base, "GET", path + "/stats")
                snap[topic + " backlog"] = (status, {
                    s: v["msgBacklog"] for s, v in stats.get("subscriptions", {}).items()})
                if topic.endswith("-DLQ"):
                    snap[topic + " live"] = call(base, "GET", path + "/letterbox/deadLetters?limit=10000")
    return snap


def test_admin_fuzz_gets_only_4xx_with_reasons_and_changes_nothing(broker_factory: Any) -> None:
    broker = broker_factory()
    base = broker.admin_url
    assert call(base, "PUT", "/admin/v2/tenants/fz", "{}")[0] == 204
    assert call(base, "PUT", "/admin/v2/namespaces/fz/ns")[0] == 204
    assert call(base, "POST", "/admin/v2/namespaces/fz/ns/letterbox/deadLetterPolicy",
                '{"maxRedeliverCount": 3}')[0] == 204
    assert call(base, "PUT", "/admin/v2/persistent/fz/ns/t")[0] == 204
    assert call(base, "PUT", "/admin/v2/persistent/fz/ns/t/subscription/s", '"earliest"')[0] == 204
    assert call(base, "PUT", "/admin/v2/persistent/fz/ns/parts/partitions", "2")[0] == 204
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer("persistent://fz/ns/t", batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode(), properties={"i": str(i)})
    assert call(base, "POST", "/admin/v2/persistent/fz/ns/t/subscription/s/expireMessages/0")[0] == 204
    for i in range(20, 30):
        producer.send(f"m{i}".encode())
    client.close()
    dlq_live = "/admin/v2/persistent/fz/ns/t-s-DLQ/letterbox/deadLetters?limit=100"
    assert wait_until(lambda: len(call(base, "GET", dlq_live)[1]) == 20, 30)

    before = _snapshot(base)
    requests = _requests(random.Random(SEED))
    assert len(requests) >= 500
    started = time.monotonic()
    bad: list[str] = []
    for method, path, body in requests:
        status, ctype, raw = _send(broker.admin_port, method, path, body)
        reason = None
        if "json" in ctype:
            try:
                reason = json.loads(raw).get("reason")
            except (ValueError, AttributeError):
                reason = None
        if not 400 <= status < 500 or not reason:
            bad.append(f"{method} {path[:120]} body={(body or b'')[:60]!r} -> {status} {raw[:200]!r}")
    elapsed = time.monotonic() - started
    assert not bad, f"{len(bad)} of {len(requests)} requests were not a 4xx with a JSON reason:\n" + "\n".join(
        bad[:40])
    assert elapsed < 60, f"{len(requests)} requests took {elapsed:.1f} s"
    assert _snapshot(base) == before
    assert "Traceback" not in broker.log()
