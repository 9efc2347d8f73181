"""Namespace and topic permission routes (Pulsar admin v2 paths), and
auth_policies in a namespace create body, on a broker with security off:
grants are stored, listed, returned in the namespace policies, revoked, and
bad bodies are refused with a reason."""
from __future__ import annotations

from typing import Any

from tests.security.http import call

NS = "/admin/v2/namespaces/acme/orders"
TOPIC = "/admin/v2/persistent/acme/orders/t1"


def _setup(base: str) -> None:
    assert call(base, "PUT", "/admin/v2/tenants/acme", {"adminRoles": ["boss"]})[0] == 204


def test_grant_list_revoke_namespace_permissions(broker: Any) -> None:
    base = broker.admin_url
    _setup(base)
    assert call(base, "PUT", NS)[0] == 204
    assert call(base, "GET", NS + "/permissions")[2] == {}
    assert call(base, "POST", NS + "/permissions/A", ["produce"])[0] == 204
    assert call(base, "POST", NS + "/permissions/B", ["consume", "produce", "consume"])[0] == 204
    assert call(base, "GET", NS + "/permissions")[2] == {"A": ["produce"], "B": ["consume", "produce"]}
    policies = call(base, "GET", NS)[2]
    assert policies["auth_policies"]["namespace_auth"] == {"A": ["produce"], "B": ["consume", "produce"]}
    assert call(base, "DELETE", NS + "/permissions/B")[0] == 204
    assert call(base, "GET", NS + "/permissions")[2] == {"A": ["produce"]}
    status, _, body = call(base, "DELETE", NS + "/permissions/B")
    assert status == 404 and "B" in body["reason"]
    status, _, body = call(base, "POST", NS + "/permissions/C", ["write"])
    assert status == 400 and "unknown action" in body["reason"]
    status, _, body = call(base, "POST", NS + "/permissions/C", {"produce": True})
    assert status == 400 and "list of strings" in body["reason"]
    status, _, body = call(base, "POST", "/admin/v2/namespaces/acme/nope/permissions/C", ["produce"])
    assert status == 404 and "acme/nope" in body["reason"]
    # subscription roles
    assert call(base, "POST", NS + "/permissions/subscription/s1", ["B"])[0] == 204
    assert call(base, "GET", NS + "/permissions/subscription/s1")[2] == ["B"]
    assert call(base, "DELETE", NS + "/permissions/s1/B")[0] == 204
    assert call(base, "GET", NS + "/permissions/subscription/s1")[2] == []
    # topic level adds to the namespace's grants
    assert call(base, "POST", TOPIC + "/permissions/D", ["consume"])[0] == 204
    assert call(base, "GET", TOPIC + "/permissions")[2] == {"A": ["produce"], "D": ["consume"]}
    status, _, body = call(base, "DELETE", TOPIC + "/permissions/A")
    assert status == 412 and "namespace" in body["reason"]
    assert call(base, "DELETE", TOPIC + "/permissions/D")[0] == 204
    assert call(base, "GET", TOPIC + "/permissions")[2] == {"A": ["produce"]}


def test_auth_policies_in_namespace_create_body(broker: Any) -> None:
    base = broker.admin_url
    if call(base, "GET", "/admin/v2/tenants/acme")[0] == 404:
        _setup(base)
    body = {"auth_policies": {
        "namespace_auth": {"app": ["consume", "produce"]},
        "destination_auth": {"persistent://acme/created/t": {"reader": ["consume"]}},
        "subscription_auth_roles": {"sub": ["app"]},
    }}
    assert call(base, "PUT", "/admin/v2/namespaces/acme/created", body)[0] == 204
    got = call(base, "GET", "/admin/v2/namespaces/acme/created")[2]["auth_policies"]
    assert got == body["auth_policies"]
    assert call(base, "GET", "/admin/v2/namespaces/acme/created/permissions")[2] == {"app": ["consume", "produce"]}
    status, _, reply = call(base, "PUT", "/admin/v2/namespaces/acme/bad",
                            {"auth_policies": {"namespace_auth": {"x": ["fly"]}}})
    assert status == 400 and "unknown action" in reply["reason"]
    assert call(base, "GET", "/admin/v2/namespaces/acme/bad")[0] == 404


def test_cli_grant_list_revoke(broker: Any) -> None:
    from click.testing import CliRunner

    from letterbox.cli import main

    base = broker.admin_url
    if call(base, "GET", "/admin/v2/tenants/acme")[0] == 404:
        _setup(base)
    assert call(base, "PUT", "/admin/v2/namespaces/acme/cli")[0] == 204
    run = CliRunner().invoke
    admin = ["admin", "--admin-url", base, "namespaces"]
    r = run(main, [*admin, "grant-permission", "acme/cli", "--role", "app", "--actions", "produce,consume"])
    assert r.exit_code == 0 and "Granted consume, produce on acme/cli to app" in r.output, r.output
    r = run(main, [*admin, "permissions", "acme/cli"])
    assert r.exit_code == 0 and r.output.strip() == "app: consume, produce", r.output
    r = run(main, [*admin, "grant-permission", "acme/cli", "--role", "app", "--actions", "fly"])
    assert r.exit_code == 2 and "produce" in r.output
    r = run(main, [*admin, "revoke-permission", "acme/cli", "--role", "app"])
    assert r.exit_code == 0, r.output
    r = run(main, [*admin, "revoke-permission", "acme/cli", "--role", "app"])
    assert r.exit_code == 1 and "HTTP 404" in r.output
