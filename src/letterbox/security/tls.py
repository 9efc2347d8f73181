# TLS for the broker's pulsar+ssl:// listener and the admin server's https://
# listener, from PEM files (Pulsar's tlsCertificateFilePath, tlsKeyFilePath,
# tlsTrustCertsFilePath). Client certificates are asked for when a trusted CA
# is configured: required with tls_require_trusted_client_cert_on_connect
# (mutual TLS), optional otherwise (a client that presents one must present a
# valid one; it then authenticates with the `tls` provider).
#
# Invariants: the context is built once at start-up; a missing or malformed
# file is a ConfigError naming the setting; TLS 1.2 is the minimum version.
from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from letterbox.config import ConfigError

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(config.tls_certificate_file_path, config.tls_key_file_path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            "tls_certificate_file_path / tls_key_file_path: cannot load the broker certificate "
            f"{config.tls_certificate_file_path!r} with key {config.tls_key_file_path!r}: {exc}"
        ) from None
    trust = config.tls_trust_certs_file_path
    if trust and not config.tls_allow_insecure_connection:
        try:
            ctx.load_verify_locations(cafile=trust)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"tls_trust_certs_file_path: cannot load trusted certificates {trust!r}: {exc}"
            ) from None
        ctx.verify_mode = (
            ssl.CERT_REQUIRED if config.tls_require_trusted_client_cert_on_connect else ssl.CERT_OPTIONAL
        )
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def peer_common_name(transport: Any) -> str | None:
    """The common name of the verified client certificate of a TLS transport, if any."""
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    try:
        cert = ssl_object.getpeercert()
    except (ValueError, ssl.SSLError):
        return None
    if not cert:
        return None  # no certificate, or one that was not verified
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and value:
                return str(value)
    return None
