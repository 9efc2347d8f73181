"""A broker started with --pulsar-config on a Pulsar-style standalone.conf that turns
on TLS, the token, basic and tls providers and authorization (superUserRoles,
anonymousUserRole) serves the official client as that Pulsar standalone does:
super users do everything, roles granted through auth_policies in a namespace
create body may do what they were granted and nothing else, refusals are
AuthorizationError naming role, action and topic."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.protocol import client_commands, pb
from tests.security.clients import official_client, round_trip, trusting
from tests.security.conftest import SecureBroker
from tests.security.http import call
from tests.security.pki import Pki, TokenKeys
from tests.security.wire import T, Wire

# `openssl passwd -apr1 -salt xyz12345 secret`
APR1_SECRET = "$apr1$xyz12345$hVFg3wOytQE97CWCezCu2/"
PROVIDERS = ",".join(
    f"org.apache.pulsar.broker.authentication.AuthenticationProvider{p}" for p in ("Token", "Basic", "Tls")
)


def standalone_conf(path: Path, pki: Pki, broker_cert: Any, keys: TokenKeys, htpasswd: Path) -> Path:
    path.write_text(f"""
# Apache Pulsar standalone.conf, as an operator keeps it
### --- General broker settings --- ###
metadataStoreUrl=
configurationMetadataStoreUrl=
brokerServicePort=
brokerServicePortTls=6651
webServicePort=
webServicePortTls=8443
bindAddress=127.0.0.1
advertisedAddress=localhost
clusterName=standalone
managedLedgerDefaultEnsembleSize=1
brokerDeleteInactiveTopicsEnabled=true
maxMessageSize=5242880

### --- TLS --- ###
tlsCertificateFilePath={broker_cert.cert}
tlsKeyFilePath={broker_cert.key}
tlsTrustCertsFilePath={pki.ca}
tlsRequireTrustedClientCertOnConnect=false
tlsProtocols=

### --- Authentication --- ###
authenticationEnabled=true
authenticationProviders={PROVIDERS}
authenticationRefreshCheckSeconds=60
tokenSecretKey=file://{keys.secret_file}
basicAuthConf={htpasswd}
authorizationEnabled=true
superUserRoles=admin,ops-cert
anonymousUserRole=anonymous
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
""")
    return path


@pytest.fixture(scope="module")
def conf_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki, broker_cert: Any,
                token_keys: TokenKeys) -> Any:
    root = tmp_path_factory.mktemp("pulsar-conf")
    htpasswd = root / ".htpasswd"
    htpasswd.write_text(f"alice:{APR1_SECRET}\n")
    conf = standalone_conf(root / "standalone.conf", pki, broker_cert, token_keys, htpasswd)
    # the ports in the file are Pulsar's; flags rank above the file, so tests use free ones
    b = SecureBroker(root / "data", ["--pulsar-config", str(conf), "--broker-service-port-tls", "0",
                                     "--web-service-port-tls", "0"]).start()
    ctx, token = trusting(pki), token_keys.hs256("admin")

    def admin(method: str, path: str, body: Any) -> int:
        return call(b.admin_tls_url, method, path, body, token=token, context=ctx)[0]

    assert admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": [], "allowedClusters": ["standalone"]}) == 204
    policies = {"auth_policies": {"namespace_auth": {"alice": ["produce"], "bob": ["consume"],
                                                     "anonymous": ["produce", "consume"]}}}
    assert admin("PUT", "/admin/v2/namespaces/acme/orders", policies) == 204
    assert admin("PUT", "/admin/v2/namespaces/acme/other", {}) == 204
    yield b
    b.stop()


def _client(b: SecureBroker, pki: Pki, auth: Any = None) -> pulsar.Client:
    kw = {"authentication": auth} if auth is not None else {}
    return official_client(b.tls_url, tls_trust_certs_file_path=str(pki.ca), tls_validate_hostname=True,
                           connection_timeout_ms=10_000, **kw)


def test_settings_from_the_pulsar_file(conf_broker: SecureBroker) -> None:
    line = conf_broker.startup_line
    assert "listening on pulsar://" not in line and "admin on http://" not in line  # empty ports: off
    assert "tls on pulsar+ssl://127.0.0.1:" in line and "admin tls on https://127.0.0.1:" in line
    assert "authentication on (token, basic, tls), anonymous role 'anonymous'" in line
    assert "authorization on" in line
    ignored = [x for x in conf_broker.lines if "letterbox does not support" in x]
    assert len(ignored) == 1  # logged once
    for key in ("managedLedgerDefaultEnsembleSize", "brokerDeleteInactiveTopicsEnabled",
                "brokerClientAuthenticationPlugin"):
        assert key in ignored[0]
    assert "tokenSecretKey" not in ignored[0] and "metadataStoreUrl" not in ignored[0]


def _round_trip(client: pulsar.Client, topic: str) -> None:
    round_trip(client, topic, b"x")


@pytest.mark.parametrize("who", ["token", "tls-cert"])
def test_super_users_do_everything(conf_broker: SecureBroker, pki: Pki, token_keys: TokenKeys, who: str) -> None:
    if who == "token":
        auth = pulsar.AuthenticationToken(token_keys.hs256("admin"))
    else:
        cert = pki.issue("ops-cert", server=False)
        auth = pulsar.AuthenticationTLS(str(cert.cert), str(cert.key))
    client = _client(conf_broker, pki, auth)
    try:
        _round_trip(client, f"persistent://acme/other/super-{who}")
        _round_trip(client, f"persistent://acme/orders/super-{who}")
    finally:
        client.close()


def test_roles_get_what_they_were_granted(conf_broker: SecureBroker, pki: Pki, token_keys: TokenKeys) -> None:
    alice = _client(conf_broker, pki, pulsar.AuthenticationBasic("alice", "secret"))  # produce
    bob = _client(conf_broker, pki, pulsar.AuthenticationToken(token_keys.hs256("bob")))  # consume
    try:
        orders = "persistent://acme/orders/grants"
        consumer = bob.subscribe(orders, "s")
        alice.create_producer(orders).send(b"granted")
        assert consumer.receive(10_000).data() == b"granted"
        with pytest.raises(pulsar.AuthorizationError):
            alice.subscribe(orders, "alice-sub")
        with pytest.raises(pulsar.AuthorizationError):
            bob.create_producer(orders)
        for client in (alice, bob):
            with pytest.raises(pulsar.AuthorizationError):
                client.create_producer("persistent://acme/other/t")
            with pytest.raises(pulsar.AuthorizationError):
                client.subscribe("persistent://acme/other/t", "s")
    finally:
        alice.close()
        bob.close()


def test_anonymous_role_gets_its_grants_only(conf_broker: SecureBroker, pki: Pki) -> None:
    client = _client(conf_broker, pki)  # no credentials: anonymousUserRole
    try:
        _round_trip(client, "persistent://acme/orders/anon")
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://acme/other/anon")
    finally:
        client.close()


def test_refusal_names_role_action_and_topic(conf_broker: SecureBroker, pki: Pki) -> None:
    wire = Wire(conf_broker.ports["tls_port"], tls_ca=str(pki.ca))
    try:
        assert wire.connect("basic", b"alice:secret").type == T.CONNECTED
        wire.send(client_commands.subscribe("persistent://acme/orders/t", "s", 1, 1))
        reply = wire.next(10)
        assert reply.type == T.ERROR and reply.error.error == pb.ServerError.Value("AuthorizationError")
        message = reply.error.message
        assert "alice" in message and "consume" in message and "persistent://acme/orders/t" in message
        wire.send(client_commands.lookup("persistent://acme/other/t", 2))
        reply = wire.next(10)
        assert reply.lookupTopicResponse.error == pb.ServerError.Value("AuthorizationError")
        assert "alice" in reply.lookupTopicResponse.message
    finally:
        wire.close()


def test_listing_a_namespace_needs_consume(conf_broker: SecureBroker, pki: Pki, token_keys: TokenKeys) -> None:
    """GET_TOPICS_OF_NAMESPACE (pattern subscriptions) is a consume operation, as in Pulsar."""
    from letterbox.protocol.framing import encode_command

    def list_topics(wire: Wire, ns: str, rid: int) -> pb.BaseCommand:
        body = pb.CommandGetTopicsOfNamespace(request_id=rid, namespace=ns)
        wire.send(encode_command(T(type=T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=body)))
        return wire.next(10)

    bob = Wire(conf_broker.ports["tls_port"], tls_ca=str(pki.ca))
    alice = Wire(conf_broker.ports["tls_port"], tls_ca=str(pki.ca))
    try:
        assert bob.connect("token", token_keys.hs256("bob").encode()).type == T.CONNECTED
        assert list_topics(bob, "acme/orders", 1).type == T.GET_TOPICS_OF_NAMESPACE_RESPONSE
        refused = list_topics(bob, "acme/other", 2)
        assert refused.type == T.ERROR and refused.error.error == pb.ServerError.Value("AuthorizationError")
        assert "bob" in refused.error.message and "acme/other" in refused.error.message
        assert alice.connect("basic", b"alice:secret").type == T.CONNECTED  # produce only
        assert list_topics(alice, "acme/orders", 3).type == T.ERROR
    finally:
        bob.close()
        alice.close()
