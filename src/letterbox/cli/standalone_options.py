# The security and listener flags of `letterbox standalone`, one per
# BrokerConfig setting (Pulsar's names in kebab case), and --pulsar-config.
# Flags left out are None, which BrokerConfig.load reads as "not given"; list
# flags take comma-separated text; a port flag given "off" (or "") disables
# that listener, as Pulsar's empty brokerServicePort does.
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from letterbox.config import DISABLED

F = TypeVar("F", bound=Callable[..., Any])


class PortOrOff(click.ParamType):  # type: ignore[type-arg]
    name = "port"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text in ("", "off", "none"):
            return DISABLED
        try:
            return int(text)
        except ValueError:
            self.fail(f"{value!r} is not a port number (or 'off')", param, ctx)


PORT = PortOrOff()

# (setting, kind, help); kind: "port", "text", "int", "flag"
SECURITY_FLAGS: list[tuple[str, str, str]] = [
    ("broker_service_port_tls", "port", "pulsar+ssl:// port (Pulsar's brokerServicePortTls, 6651 there) [off]; 0 picks a free port."),
    ("web_service_port_tls", "port", "https:// admin port (Pulsar's webServicePortTls, 8443 there) [off]; 0 picks a free port."),
    ("tls_certificate_file_path", "text", "PEM certificate of the broker's TLS listeners."),
    ("tls_key_file_path", "text", "PEM private key of that certificate."),
    ("tls_trust_certs_file_path", "text", "PEM CA certificate(s) client certificates must chain to."),
    ("tls_require_trusted_client_cert_on_connect", "flag", "Mutual TLS: refuse clients without a trusted certificate."),
    ("tls_allow_insecure_connection", "flag", "Do not verify client certificates."),
    ("authentication_enabled", "flag", "Require clients to authenticate."),
    ("authentication_providers", "text", "Comma-separated: token, basic, tls (or Pulsar's provider class names)."),
    ("authentication_refresh_check_seconds", "int", "How often a connection's token expiry is checked [60]."),
    ("authorization_enabled", "flag", "Check roles' permissions on every produce, consume and lookup."),
    ("super_user_roles", "text", "Comma-separated roles that may do everything."),
    ("anonymous_user_role", "text", "Role of clients that send no credentials (none by default)."),
    ("token_secret_key", "text", "HS256 key: file:///path, data:;base64,... or base64."),
    ("token_public_key", "text", "RS256/ES256 public key: file:///path, data:;base64,... or base64."),
    ("token_auth_claim", "text", "Token claim holding the role [sub]."),
    ("token_audience_claim", "text", "Token claim holding the audience [aud]."),
    ("token_audience", "text", "Audience a token must name (unchecked when empty)."),
    ("basic_auth_conf", "text", "htpasswd file of the basic provider (Pulsar's basicAuthConf)."),
    ("admin_allowed_hosts", "text", "Comma-separated Host names the admin port also answers to "
     "(besides IP addresses, localhost, the bind and advertised names); * for any."),
]


def security_options(fn: F) -> F:
    """Add one option per SECURITY_FLAGS entry and --pulsar-config to a command."""
    for setting, kind, help_text in reversed(SECURITY_FLAGS):
        flag = "--" + setting.replace("_", "-")
        if kind == "flag":
            opt = click.option(f"{flag}/--no-{flag[2:]}", setting, default=None, help=help_text)
        elif kind == "port":
            opt = click.option(flag, setting, type=PORT, help=help_text)
        elif kind == "int":
            opt = click.option(flag, setting, type=int, help=help_text)
        else:
            opt = click.option(flag, setting, help=help_text)
        fn = opt(fn)
    pulsar = click.option(
        "--pulsar-config",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="A Pulsar broker.conf / standalone.conf (key=value); the keys letterbox supports apply, "
        "below --config, LETTERBOX_* and flags.",
    )
    return pulsar(fn)


def security_overrides(values: dict[str, Any]) -> dict[str, Any]:
    """The security settings given as flags, from a command's keyword arguments."""
    return {setting: values.get(setting) for setting, _, _ in SECURITY_FLAGS}
