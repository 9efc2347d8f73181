"""AuthOptions: one identity for pulsar.Client and the admin HTTP calls, from a
plugin name and its parameters (the official client's authPlugin/authParams)."""
from __future__ import annotations

import base64
from pathlib import Path

import pulsar
import pytest

from letterbox.auth_options import AuthOptions, AuthOptionsError


def test_token_forms(tmp_path: Path) -> None:
    assert AuthOptions("token", "token:abc").http_headers() == {"Authorization": "Bearer abc"}
    path = tmp_path / "t.jwt"
    path.write_text("from-file\n")
    opts = AuthOptions("org.apache.pulsar.client.impl.auth.AuthenticationToken", f"file://{path}")
    assert opts.token() == "from-file"
    path.write_text("rotated")
    assert opts.http_headers() == {"Authorization": "Bearer rotated"}
    assert AuthOptions.from_token(lambda: "supplied").http_headers() == {"Authorization": "Bearer supplied"}
    assert isinstance(AuthOptions.from_token("x").client_kwargs()["authentication"], pulsar.AuthenticationToken)
    assert AuthOptions.from_token(None).client_kwargs() == {} and AuthOptions().http_headers() == {}


def test_basic_and_tls_forms(tmp_path: Path) -> None:
    basic = AuthOptions("basic", '{"userId": "u", "password": "p:w"}')
    assert basic.http_headers() == {"Authorization": "Basic " + base64.b64encode(b"u:p:w").decode()}
    assert isinstance(basic.client_kwargs()["authentication"], pulsar.AuthenticationBasic)
    with pytest.raises(AuthOptionsError, match="userId"):
        AuthOptions("basic", '{"user": "u"}')
    with pytest.raises(AuthOptionsError, match="tlsCertFile"):
        AuthOptions("tls", "tlsCertFile:/c")


def test_bad_plugin_and_missing_trust_file(tmp_path: Path) -> None:
    with pytest.raises(AuthOptionsError, match="unknown authentication plugin 'kerberos'"):
        AuthOptions("kerberos")
    with pytest.raises(AuthOptionsError, match="does not exist"):
        AuthOptions(tls_trust_certs_file_path=str(tmp_path / "nope.pem"))
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert AuthOptions(tls_trust_certs_file_path=str(ca)).client_kwargs() == {"tls_trust_certs_file_path": str(ca)}


def test_spark_options_carry_the_auth_options(tmp_path: Path) -> None:
    from letterbox.spark.options import ReadOptions, SparkOptionError, WriteOptions

    base = {"service_url": "pulsar+ssl://h:6651", "topic": "t"}
    read = ReadOptions.parse({**base, "auth_plugin": "token", "auth_params": "token:abc"})
    assert read.auth.http_headers() == {"Authorization": "Bearer abc"}
    assert "authentication" in read.auth.client_kwargs()
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    write = WriteOptions.parse({**base, "tls_trust_certs_file_path": str(ca)})
    assert write.auth.client_kwargs() == {"tls_trust_certs_file_path": str(ca)}
    with pytest.raises(SparkOptionError, match="auth_params needs auth_plugin"):
        ReadOptions.parse({**base, "auth_params": "token:abc"})
    with pytest.raises(SparkOptionError, match="unknown authentication plugin"):
        WriteOptions.parse({**base, "auth_plugin": "athenz"})
