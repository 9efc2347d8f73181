"""DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1 makes the
visitor's browser send same-origin requests (Origin and Host both evil.example) to a
broker on the visitor's machine. The admin server answers only to the names it is meant
to: a foreign Host gets 421 with a reason and changes nothing; IP addresses, localhost
and configured names keep working."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.admin.helpers import call
from tests.conftest import BrokerProcess


def test_a_foreign_host_is_refused_and_creates_nothing(broker: BrokerProcess) -> None:
    base = broker.admin_url
    tenant = f"evil{uuid.uuid4().hex[:6]}"
    evil = {"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "application/json"}
    for method, path, body in (("PUT", f"/admin/v2/tenants/{tenant}", "{}"),
                               ("GET", "/admin/v2/tenants", None),
                               ("GET", "/metrics", None),
                               ("GET", "/", None)):
        status, reply = call(base, method, path, body, headers=evil)
        assert status == 421, (path, status, reply)
        assert "evil.example" in reply["reason"] and "admin_allowed_hosts" in reply["reason"]
    status, tenants = call(base, "GET", "/admin/v2/tenants")
    assert status == 200 and tenant not in tenants
    status, _ = call(base, "GET", "/admin/v2/tenants", headers={"Host": "evil.example:80"})
    assert status == 421
    port = broker.admin_port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "console.localhost", f"[::1]:{port}",
                 "10.1.2.3"):
        status, reply = call(base, "GET", "/admin/v2/tenants", headers={"Host": host})
        assert status == 200, (host, reply)


def test_configured_names_are_answered(broker_factory: Any, tmp_path: Path) -> None:
    b: BrokerProcess = broker_factory(tmp_path / "data", env={"LETTERBOX_ADMIN_ALLOWED_HOSTS": "broker.internal"},
                                      args=["--advertised-address", "broker.example",
                                            "--admin-allowed-hosts", "ops.example,other.example"])
    for host, expected in (("broker.example", 200), ("ops.example:8080", 200), ("other.example", 200),
                           ("broker.internal", 421),  # the flag wins over the environment
                           ("evil.example", 421)):
        status, reply = call(b.admin_url, "GET", "/admin/v2/tenants", headers={"Host": host})
        assert status == expected, (host, status, reply)
    any_host: BrokerProcess = broker_factory(tmp_path / "any", env={"LETTERBOX_ADMIN_ALLOWED_HOSTS": "*"})
    assert call(any_host.admin_url, "GET", "/admin/v2/tenants", headers={"Host": "evil.example"})[0] == 200
