# The click options for authentication and TLS of every CLI command that talks
# to a broker (the letterbox CLI and the Spark pipeline commands): --auth-token TOKEN, --auth-token-file PATH (env LETTERBOX_AUTH_TOKEN
# for the token itself) and --tls-trust-certs CA.pem (env
# LETTERBOX_TLS_TRUST_CERTS). They are collected into the click context's
# meta, so groups and leaf commands share them without changing the commands'
# signatures; current_auth() turns them into one AuthOptions (auth_options.py)
# that gives both pulsar.Client and the admin HTTP client the same identity.
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from letterbox.auth_options import AuthOptions, AuthOptionsError

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
        raise click.UsageError("give --auth-token or --auth-token-file, not both")
    try:
        if token_file:
            text = Path(token_file).read_text().strip()
            if not text:
                raise click.UsageError(f"the token file {token_file} is empty")
            token = text
        return AuthOptions.from_token(token or None, given.get("tls_trust_certs") or "")
    except (OSError, AuthOptionsError) as exc:
        raise click.UsageError(str(exc)) from None
