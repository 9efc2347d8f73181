"""TLS on the binary and admin ports, through the official client over real TLS,
with certificates made at test time: a client trusting the CA produces and
consumes over pulsar+ssl://; one that does not is refused; with mutual TLS a
client without a certificate is refused and one with a certificate gets its CN
as role."""
from __future__ import annotations

import json
import socket
import ssl
import urllib.request
from typing import Any

import pulsar
import pytest

from tests.conftest import _quiet_logger
from tests.security.clients import official_client, round_trip, trusting
from tests.security.conftest import tls_args
from tests.security.pki import Pki

_client = official_client


def _round_trip(client: pulsar.Client, topic: str) -> None:
    round_trip(client, topic, b"over tls")


def test_tls_client_trusting_the_ca_produces_and_consumes(secure_broker: Any, pki: Pki, broker_cert: Any) -> None:
    b = secure_broker([*tls_args(broker_cert, pki), "--advertised-address", "localhost"])
    assert "port" not in b.ports and "admin_port" not in b.ports  # plain listeners off
    client = _client(b.tls_url, tls_trust_certs_file_path=str(pki.ca), tls_validate_hostname=True)
    try:
        _round_trip(client, "tls-round-trip")
    finally:
        client.close()
    # the admin API answers over https:// with the same certificate
    ctx = trusting(pki)
    url = f"{b.admin_tls_url}/admin/v2/tenants"
    with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
        assert resp.status == 200
        assert "public" in resp.read().decode()
    # ... and its HTTP lookup names the TLS listener, so an https:// service URL works too
    lookup = f"{b.admin_tls_url}/lookup/v2/topic/persistent/public/default/x"
    with urllib.request.urlopen(lookup, context=ctx, timeout=10) as resp:
        urls = json.loads(resp.read())
    assert urls["brokerUrlTls"] == f"pulsar+ssl://localhost:{b.ports['tls_port']}"
    assert urls["httpUrlTls"] == f"{b.admin_tls_url}"
    http_client = _client(f"{b.admin_tls_url}", tls_trust_certs_file_path=str(pki.ca))
    try:
        _round_trip(http_client, "tls-http-lookup")
    finally:
        http_client.close()


def test_tls_alongside_the_plain_port(secure_broker: Any, pki: Pki, broker_cert: Any) -> None:
    b = secure_broker(tls_args(broker_cert, pki, plain=True))
    assert {"port", "tls_port", "admin_port", "admin_tls_port"} <= set(b.ports)
    plain = _client(b.url)
    secure = _client(b.tls_url, tls_trust_certs_file_path=str(pki.ca))
    try:
        _round_trip(plain, "both-listeners")
        _round_trip(secure, "both-listeners-tls")
    finally:
        plain.close()
        secure.close()


def test_client_not_trusting_the_ca_is_refused(
    secure_broker: Any, pki: Pki, broker_cert: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    b = secure_broker(tls_args(broker_cert, pki))
    other = Pki(tmp_path_factory.mktemp("other-ca"), "some other CA")
    client = _client(b.tls_url, tls_trust_certs_file_path=str(other.ca))
    try:
        with pytest.raises(pulsar.ConnectError):
            client.create_producer("untrusted")
    finally:
        client.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        ssl.create_default_context(cafile=str(other.ca)).wrap_socket(
            socket.create_connection(("127.0.0.1", b.ports["tls_port"]), timeout=10),
            server_hostname="localhost",
        )


def test_mutual_tls_refuses_a_client_without_a_certificate(secure_broker: Any, pki: Pki, broker_cert: Any) -> None:
    b = secure_broker([*tls_args(broker_cert, pki), "--tls-require-trusted-client-cert-on-connect"])
    client = pulsar.Client(b.tls_url, tls_trust_certs_file_path=str(pki.ca), operation_timeout_seconds=4,
                           connection_timeout_ms=3000, logger=_quiet_logger())
    try:
        # the client retries the refused handshake until its operation timeout
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
            client.create_producer("mtls-no-cert")
    finally:
        client.close()
    # on the wire: the handshake (or the first read, with TLS 1.3) fails for want of a certificate
    ctx = trusting(pki)
    raw = socket.create_connection(("127.0.0.1", b.ports["tls_port"]), timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionResetError)), ctx.wrap_socket(
        raw, server_hostname="localhost"
    ) as sock:
        sock.sendall(b"\x00\x00\x00\x00")
        if not sock.recv(1):
            raise ConnectionResetError("closed without a certificate")
    raw.close()


def test_mutual_tls_client_certificate_cn_is_the_role(secure_broker: Any, pki: Pki, broker_cert: Any) -> None:
    """With the tls provider and authorization on, the CN is the role: a super user
    CN may produce, another CN is refused with AuthorizationError naming its role."""
    b = secure_broker([
        *tls_args(broker_cert, pki), "--tls-require-trusted-client-cert-on-connect",
        "--authentication-enabled", "--authentication-providers", "tls",
        "--authorization-enabled", "--super-user-roles", "ops-admin",
    ])
    admin_cert = pki.issue("ops-admin", server=False)
    alice_cert = pki.issue("alice", server=False)
    admin = _client(b.tls_url, tls_trust_certs_file_path=str(pki.ca),
                    authentication=pulsar.AuthenticationTLS(str(admin_cert.cert), str(admin_cert.key)))
    alice = _client(b.tls_url, tls_trust_certs_file_path=str(pki.ca),
                    authentication=pulsar.AuthenticationTLS(str(alice_cert.cert), str(alice_cert.key)))
    try:
        _round_trip(admin, "mtls-role")
        with pytest.raises(pulsar.AuthorizationError):
            alice.create_producer("mtls-role")
    finally:
        admin.close()
        alice.close()
