# The click options for authentication and TLS of every CLI command that talks
# to a broker (the letterbox CLI and the Spark pipeline commands): --auth-token TOKEN, --auth-token-file PATH (env LETTERBOX_AUTH_TOKEN
# for the token itself) and --tls-trust-certs CA.pem (env
# LETTERBOX_TLS_TRUST_CERTS). They are collected into the click context's
# meta, so groups and leaf commands share them without changing the commands'
# signatures; current_auth() turns them into one AuthOptions (auth_options.py)
# that gives both pulsar.Client and the admin HTTP client the same identity.
from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import click

from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.usage_errors import OneLineUsageError

_META = "letterbox.auth"


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_META, {})[param.name] = value


def auth_options(f: Any) -> Any:
    f = click.option(
        "--tls-trust-certs", type=click.Path(dir_okay=False, exists=True), envvar="LETTERBOX_TLS_TRUST_CERTS",
        expose_value=False, callback=_remember,
        help="CA certificate(s), PEM, that the broker's TLS certificate must chain to "
        "(for pulsar+ssl:// and https:// URLs; env LETTERBOX_TLS_TRUST_CERTS).",
    )(f)
    f = click.option(
        "--auth-token-file", type=click.Path(dir_okay=False, exists=True), expose_value=False,
        callback=_remember, help="Read the authentication token (a JWT) from this file.",
    )(f)
    f = click.option(
        "--auth-token", envvar="LETTERBOX_AUTH_TOKEN", expose_value=False, callback=_remember,
        help="Authentication token (a JWT, e.g. from `letterbox tokens create`; env LETTERBOX_AUTH_TOKEN).",
    )(f)
    return f


def current_auth() -> AuthOptions:
    """The AuthOptions of the running command (no authentication when none was given)."""
    ctx = click.get_current_context(silent=True)
    given: dict[str, Any] = ctx.meta.get(_META, {}) if ctx is not None else {}
    token, token_file = given.get("auth_token"), given.get("auth_token_file")
    if token and token_file:
        raise OneLineUsageError("give --auth-token or --auth-token-file, not both")
    try:
        if token_file:
            token = _read_token_file(token_file)
        if token:
            _check_token(token, f"the token file {token_file}" if token_file else "the token of --auth-token")
        trust = given.get("tls_trust_certs") or ""
        if trust:
            _check_trust_certs(trust)
        return AuthOptions.from_token(token or None, trust)
    except (OSError, AuthOptionsError) as exc:
        raise OneLineUsageError(str(exc)) from None


def _read_token_file(path: str) -> str:
    try:
        text = Path(path).read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError:
        raise OneLineUsageError(f"the token file {path} is not UTF-8 text: a token (a JWT) is one line of "
                                "ASCII; write only the token there, as `letterbox tokens create` prints it") from None
    if not text:
        raise OneLineUsageError(f"the token file {path} is empty")
    return text


def _check_token(token: str, where: str) -> None:
    """A token is one line of printable ASCII; the message names where it came from, never the token."""
    if any(c.isspace() or not c.isprintable() or not c.isascii() for c in token.strip()):
        raise OneLineUsageError(f"{where} has a line break, space or control character inside it: a token "
                                "(a JWT) is one line of printable ASCII; keep only the token")


def _check_trust_certs(path: str) -> None:
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, ValueError, UnicodeDecodeError):
        raise OneLineUsageError(f"--tls-trust-certs {path} holds no PEM certificate: give the CA certificate "
                                "file in PEM form (-----BEGIN CERTIFICATE-----; convert DER with "
                                "`openssl x509 -inform der -in CA.der -out CA.pem`)") from None
