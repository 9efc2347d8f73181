"""Security settings without a broker: the Pulsar config reader, key URL forms,
htpasswd hashes, and BrokerConfig's validation messages; plus the safe default
bind address of a real `letterbox standalone`."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from letterbox.config import BrokerConfig, ConfigError
from letterbox.security.authentication import (
    AuthenticationFailed,
    AuthenticationService,
    Credentials,
)
from letterbox.security.htpasswd import Htpasswd, md5_crypt, verify_password
from letterbox.security.pulsar_config import PulsarConfigError, parse_pulsar_config
from letterbox.security.token_keys import KeyMaterialError, public_key, read_key_bytes, secret_key
from tests.security.pki import TokenKeys


def test_pulsar_config_maps_known_keys_and_lists_the_ignored_ones() -> None:
    parsed = parse_pulsar_config("""
# comment
! also a comment

brokerServicePort=
brokerServicePortTls = 6651
webServicePort=8080
bindAddress=0.0.0.0
superUserRoles=admin, ops
pulsar.auth.basic.conf=/etc/pulsar/.htpasswd
managedLedgerCacheSizeMB=
zookeeperServers=zk:2181
zookeeperServers=zk:2182
""")
    assert parsed.values == {
        "port": "", "broker_service_port_tls": "6651", "admin_port": "8080", "bind": "0.0.0.0",
        "super_user_roles": "admin, ops", "basic_auth_conf": "/etc/pulsar/.htpasswd",
    }
    assert parsed.ignored == ["zookeeperServers"]  # once; empty unknown keys are not noise
    cfg = BrokerConfig.load(env={}, pulsar_settings={"admin_port": ""})
    assert cfg.admin_port is None and cfg.port == 6650  # an empty webServicePort: no plain admin


def test_every_pulsar_key_maps_to_a_setting() -> None:
    from dataclasses import fields

    from letterbox.security.pulsar_config import PULSAR_KEYS

    names = {f.name for f in fields(BrokerConfig)}
    assert set(PULSAR_KEYS.values()) <= names


def test_pulsar_config_empty_plain_port_needs_a_tls_port() -> None:
    with pytest.raises(ConfigError, match="port is disabled and broker_service_port_tls is not set"):
        BrokerConfig.load(env={}, pulsar_settings={"port": ""})


def test_pulsar_config_ranks_below_file_env_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "letterbox.toml"
    toml.write_text('cluster_name = "from-toml"\n')
    cfg = BrokerConfig.load(
        config_file=toml, env={"LETTERBOX_ANONYMOUS_USER_ROLE": "env-anon"},
        overrides={"super_user_roles": "flag-admin"},
        pulsar_settings={"cluster_name": "from-pulsar", "anonymous_user_role": "pulsar-anon",
                         "super_user_roles": "pulsar-admin", "token_auth_claim": "role"},
    )
    assert (cfg.cluster_name, cfg.anonymous_user_role) == ("from-toml", "env-anon")
    assert cfg.super_user_roles == ["flag-admin"]
    assert cfg.token_auth_claim == "role"


def test_pulsar_config_bad_line() -> None:
    with pytest.raises(PulsarConfigError, match="line 2: expected key=value"):
        parse_pulsar_config("a=b\njust words\n")


def test_default_bind_is_loopback() -> None:
    assert BrokerConfig().bind == "127.0.0.1"


def test_default_bind_of_a_real_broker(secure_broker: Any) -> None:
    b = secure_broker(["--port", "0", "--admin-port", "0"])  # no --bind
    assert "listening on pulsar://127.0.0.1:" in b.startup_line
    assert "admin on http://127.0.0.1:" in b.startup_line
    assert b.startup_line.rstrip().endswith("authentication off, authorization off")


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"broker_service_port_tls": 0}, "tls_certificate_file_path must be set"),
        ({"broker_service_port_tls": 0, "tls_certificate_file_path": "/nope.pem",
          "tls_key_file_path": "/nope.key"}, "tls_certificate_file_path: no such file"),
        ({"tls_require_trusted_client_cert_on_connect": True}, "needs tls_trust_certs_file_path"),
        ({"authentication_enabled": True}, "authentication_enabled needs authentication_providers"),
        ({"authentication_providers": ["kerberos"]}, "unknown provider(s) 'kerberos'"),
        ({"authentication_providers": ["token"]}, "needs token_secret_key or token_public_key"),
        ({"authentication_providers": ["basic"]}, "needs basic_auth_conf"),
        ({"authentication_refresh_check_seconds": 0}, "authentication_refresh_check_seconds must be >= 1"),
        ({"web_service_port_tls": 70000}, "web_service_port_tls must be between 0 and 65535"),
    ],
)
def test_security_settings_are_validated(settings: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(env={}, overrides=settings)
    assert fragment in str(info.value)


def test_env_lists_and_disabled_ports() -> None:
    cfg = BrokerConfig.load(env={
        "LETTERBOX_SUPER_USER_ROLES": "admin,ops", "LETTERBOX_ADMIN_PORT": "",
        "LETTERBOX_AUTHENTICATION_PROVIDERS":
            "org.apache.pulsar.broker.authentication.AuthenticationProviderTls,token",
        "LETTERBOX_TOKEN_SECRET_KEY": "c2VjcmV0",
    })
    assert cfg.super_user_roles == ["admin", "ops"]
    assert cfg.admin_port is None
    assert cfg.auth_provider_names() == ["tls", "token"]


def test_key_url_forms(tmp_path: Path) -> None:
    raw = b"\x00\x01secret bytes\xff"
    path = tmp_path / "k"
    path.write_bytes(raw)
    b64 = base64.b64encode(raw).decode()
    for value in (f"file://{path}", str(path), f"data:;base64,{b64}", f"data:application/octet-stream;base64,{b64}", b64):
        assert read_key_bytes(value, "token_secret_key") == raw
    with pytest.raises(KeyMaterialError, match="token_secret_key: cannot read key file"):
        read_key_bytes(f"file://{tmp_path}/missing", "token_secret_key")
    with pytest.raises(KeyMaterialError, match="neither an existing file"):
        read_key_bytes("/no/such/file!", "token_secret_key")


def test_public_keys_der_and_pem(token_keys: TokenKeys) -> None:
    from cryptography.hazmat.primitives import serialization

    assert public_key(str(token_keys.public_file)).algorithms[0] == "RS256"
    pem = token_keys.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    assert public_key("data:;base64," + base64.b64encode(pem).decode()).algorithms[0] == "RS256"
    with pytest.raises(KeyMaterialError, match=r"not an X\.509 public key"):
        public_key("data:;base64," + base64.b64encode(b"junk").decode())
    assert secret_key(str(token_keys.secret_file)).key == token_keys.secret


def test_es256_tokens(tmp_path: Path) -> None:
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pub = tmp_path / "ec.pub"
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.DER,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    cfg = BrokerConfig(authentication_enabled=True, authentication_providers=["token"],
                       token_public_key=f"file://{pub}", token_auth_claim="role")
    auth = AuthenticationService(cfg.validate())
    token = jwt.encode({"role": ["svc-ec", "other"]}, key, algorithm="ES256")
    assert auth.authenticate(Credentials("token", token.encode())) == "svc-ec"  # first of a list
    with pytest.raises(AuthenticationFailed, match="signed with HS256; the broker's keys verify ES256"):
        auth.authenticate(Credentials("token", jwt.encode({"role": "x"}, "k" * 32, algorithm="HS256").encode()))
    with pytest.raises(AuthenticationFailed, match="no 'role' claim"):
        auth.authenticate(Credentials("token", jwt.encode({"sub": "x"}, key, algorithm="ES256").encode()))


def test_tls_provider_needs_a_verified_certificate() -> None:
    auth = AuthenticationService(BrokerConfig(authentication_enabled=True, authentication_providers=["tls"]))
    assert auth.authenticate(Credentials("tls", b"", peer_common_name="client-7")) == "client-7"
    with pytest.raises(AuthenticationFailed, match="no verified client certificate"):
        auth.authenticate(Credentials("tls", b""))


def test_htpasswd_hashes() -> None:
    assert md5_crypt(b"secret", b"xyz12345", b"$apr1$") == "$apr1$xyz12345$hVFg3wOytQE97CWCezCu2/"
    bc = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    assert verify_password("pw", bc) and verify_password("pw", bc.replace("$2b$", "$2y$", 1))
    assert not verify_password("nope", bc)
    users = Htpasswd.parse("# users\nalice:$apr1$xyz12345$hVFg3wOytQE97CWCezCu2/\n")
    assert users.check("alice", "secret") is None
    assert users.check("alice", "Secret") == "wrong password for user 'alice'"
    assert users.check("eve", "secret") == "no such user 'eve'"


def test_htpasswd_non_ascii_hash_is_a_refusal_not_a_crash() -> None:
    """The constant-time comparison takes bytes: a stray non-ASCII character in a hash
    (or a password) is a wrong password, not a TypeError out of hmac.compare_digest."""
    users = Htpasswd.parse("carol:$apr1$s\u00e4lz$abc\ndave:x\u00e9yzabcdefghi\n")
    assert users.check("carol", "pw") == "wrong password for user 'carol'"
    assert users.check("dave", "p\u00e9") == "wrong password for user 'dave'"
    assert users.check("carol", "p\u00e9") == "wrong password for user 'carol'"
