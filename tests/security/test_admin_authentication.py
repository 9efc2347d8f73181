"""The admin API over https with every provider on (token, basic, tls): a
client certificate's common name is the role, `Authorization: Basic` is checked
against the htpasswd file, and missing or wrong credentials answer 401 with a
reason and WWW-Authenticate; a known role without rights gets 403. The
AuthOptions of the tools (auth_options.py) carry a client certificate too."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from letterbox.auth_options import AuthOptions
from tests.security.conftest import tls_args
from tests.security.http import call
from tests.security.pki import Pki


@pytest.fixture
def https_broker(secure_broker: Any, broker_cert: Any, pki: Pki, tmp_path: Path) -> str:
    htpasswd = tmp_path / ".htpasswd"
    htpasswd.write_text(f"alice:{bcrypt.hashpw(b'alice-pw', bcrypt.gensalt(5)).decode()}\n")
    b = secure_broker([
        *tls_args(broker_cert, pki),
        "--authentication-enabled", "--authentication-providers", "token,basic,tls",
        "--token-secret-key", "data:;base64," + base64.b64encode(b"k" * 32).decode(),
        "--basic-auth-conf", str(htpasswd),
        "--authorization-enabled", "--super-user-roles", "ops-cert,alice",
    ])
    return f"https://localhost:{b.ports['admin_tls_port']}"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_certificate_and_basic_credentials_on_the_admin_api(https_broker: str, pki: Pki) -> None:
    ops = pki.issue("ops-cert", server=False)
    stranger = pki.issue("stranger-cert", server=False)
    as_ops = AuthOptions("tls", f"tlsCertFile:{ops.cert},tlsKeyFile:{ops.key}", str(pki.ca))
    status, _, body = call(https_broker, "GET", "/admin/v2/tenants", context=as_ops.ssl_context())
    assert status == 200 and "public" in body
    as_stranger = AuthOptions("tls", f"tlsCertFile:{stranger.cert},tlsKeyFile:{stranger.key}", str(pki.ca))
    status, _, body = call(https_broker, "GET", "/admin/v2/tenants", context=as_stranger.ssl_context())
    assert status == 403 and "stranger-cert" in body["reason"]
    trust_only = AuthOptions(tls_trust_certs_file_path=str(pki.ca)).ssl_context()
    status, _, body = call(https_broker, "GET", "/admin/v2/tenants", auth=_basic("alice", "alice-pw"),
                           context=trust_only)
    assert status == 200
    status, headers, body = call(https_broker, "GET", "/admin/v2/tenants", auth=_basic("alice", "wrong"),
                                 context=trust_only)
    assert status == 401 and "Basic" in headers["WWW-Authenticate"] and body["reason"]
    status, headers, body = call(https_broker, "GET", "/admin/v2/tenants", context=trust_only)
    assert status == 401 and "Bearer" in headers["WWW-Authenticate"] and "Authentication required" in body["reason"]
    status, _, body = call(https_broker, "GET", "/admin/v2/tenants", auth="Basic %%%", context=trust_only)
    assert status == 401 and "base64" in body["reason"]
    status, _, body = call(https_broker, "GET", "/admin/v2/tenants", auth="Negotiate abc", context=trust_only)
    assert status == 401 and "Negotiate" in body["reason"]
