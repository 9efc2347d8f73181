"""Every admin route is guarded when security is on: the test walks aiohttp's
route table of the admin app and calls each route on a broker with token
authentication and authorization enabled — without credentials (401 with a
reason and WWW-Authenticate), with a bad token (401), and as a role that has no
rights (403 with a reason). Only the routes access_rules marks OPEN answer
otherwise, and they are listed here by name, so a new route cannot be left
open unnoticed. Every route must also have its own declared rule in
access_rules.RULES: a new route fails the walk until someone decides who may
call it."""
from __future__ import annotations

import re
from pathlib import Path

from letterbox.admin.access_rules import RULES, Access, access_for, is_declared
from letterbox.admin.server import AdminServer
from letterbox.broker.service import BrokerService
from letterbox.config import BrokerConfig
from tests.security.conftest import SUPER_USER, Secured
from tests.security.http import call

# /metrics, and the dead-letter console's static files (no data in them: every data call the
# page makes goes through the protected API, walked below like any other route)
EXPECTED_OPEN = {("GET", "/metrics"), ("GET", "/metrics/"), ("GET", "/"), ("GET", "/console/{file}")}
SAMPLE = {
    "domain": "persistent", "tenant": "acme", "namespace": "orders", "topic": "t", "subscription": "s",
    "n": "1", "timestamp": "0", "seconds": "1", "ledgerId": "1", "entryId": "0", "cluster": "standalone",
    "role": "someone", "file": "app.js", "taskId": "0123456789abcdef", "messageId": "1:0:-1:-1",
    "version": "0",
}


def admin_routes(tmp_path: Path) -> list[tuple[str, str]]:
    """(method, path template) of every route the admin app registers (HEAD is GET's)."""
    service = BrokerService(BrokerConfig(data_dir=tmp_path / "unused"))
    app = AdminServer(service).build_app()
    out = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "OPTIONS") or route.resource is None:
            continue
        out.add((route.method, route.resource.canonical))
    return sorted(out)


def test_every_route_has_a_declared_rule(tmp_path: Path) -> None:
    routes = admin_routes(tmp_path)
    undeclared = [f"{m} {t}" for m, t in routes if not is_declared(m, t)]
    assert not undeclared, "admin routes without a rule in admin/access_rules.py:\n" + "\n".join(undeclared)
    stale = sorted(set(RULES) - set(routes))
    assert not stale, f"rules for routes the admin app does not register: {stale}"


def concrete(template: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template)


def test_every_route_refuses_anonymous_and_unprivileged_callers(secured: Secured, tmp_path: Path) -> None:
    routes = admin_routes(tmp_path)
    assert len(routes) > 50, routes  # the walk is not vacuous
    opened = {r for r in routes if access_for(*r) is Access.OPEN}
    assert opened == EXPECTED_OPEN
    # the tenant and namespace exist, so "no rights" is what refuses, not a 404
    assert secured.admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["acme-admin"]})[0] == 204
    assert secured.admin("PUT", "/admin/v2/namespaces/acme/orders")[0] == 204
    base = secured.broker.admin_url
    nobody = secured.token("nobody")
    forged = Secured(secured.broker, b"another key, another signature!!").token(SUPER_USER)
    failures = []
    for method, template in routes:
        if (method, template) in EXPECTED_OPEN:
            continue
        path = concrete(template)
        body = {} if method in ("POST", "PUT") else None
        status, headers, reply = call(base, method, path, body)
        if status != 401 or "reason" not in reply or "Bearer" not in headers.get("WWW-Authenticate", ""):
            failures.append(f"anonymous {method} {path}: {status} {reply}")
        status, _, reply = call(base, method, path, body, token=forged)
        if status != 401 or "reason" not in reply:
            failures.append(f"forged token {method} {path}: {status} {reply}")
        status, _, reply = call(base, method, path, body, token=nobody)
        if status != 403 or "nobody" not in reply.get("reason", ""):
            failures.append(f"role without rights {method} {path}: {status} {reply}")
    assert not failures, "\n".join(failures)
    for method, template in EXPECTED_OPEN:
        assert call(base, method, concrete(template))[0] == 200, template


def test_super_user_and_tenant_admin_get_through(secured: Secured) -> None:
    if secured.admin("GET", "/admin/v2/tenants/acme")[0] == 404:
        assert secured.admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["acme-admin"]})[0] == 204
    assert secured.admin("GET", "/admin/v2/tenants")[0] == 200
    # a tenant admin manages its tenant's namespaces and grants, not other tenants or clusters
    status, _ = secured.admin("PUT", "/admin/v2/namespaces/acme/admin-made", role="acme-admin")
    assert status == 204
    status, _ = secured.admin("POST", "/admin/v2/namespaces/acme/admin-made/permissions/app", ["consume"],
                              role="acme-admin")
    assert status == 204
    status, reply = secured.admin("GET", "/admin/v2/namespaces/public/default/permissions", role="acme-admin")
    assert status == 403 and "tenant public" in reply["reason"]
    status, reply = secured.admin("GET", "/admin/v2/tenants", role="acme-admin")
    assert status == 403 and "super user" in reply["reason"]
    # consume on a namespace opens its reads (stats, listing) and nothing that changes it
    assert secured.admin("PUT", "/admin/v2/persistent/acme/admin-made/t1")[0] == 204
    assert secured.admin("GET", "/admin/v2/persistent/acme/admin-made/t1/stats", role="app")[0] == 200
    assert secured.admin("GET", "/admin/v2/namespaces/acme/admin-made/topics", role="app")[0] == 200
    status, reply = secured.admin("DELETE", "/admin/v2/persistent/acme/admin-made/t1", role="app")
    assert status == 403 and "admin role of tenant acme" in reply["reason"]
