# `letterbox tokens`: the shapes of Pulsar's `pulsar tokens` tool.
#   create-secret-key [-a HS256] [-o FILE] [-b]      raw key bytes (base64 with -b)
#   create-key-pair [-a RS256] --output-private-key F --output-public-key F   DER files
#   create -s ROLE (--secret-key KEY | --private-key KEY) [-e 1h] [-a ALG] [-hs k=v]
#   validate (--secret-key KEY | --public-key KEY) [TOKEN | -i | -f FILE]   prints the claims
#   show [TOKEN | -i | -f FILE]                       header and claims, unverified
# KEY is a file:///path, data:;base64,... URL, a path, or base64 text, read as
# the broker reads token_secret_key / token_public_key.
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import click

from letterbox.cli.params import KEY_VALUE

# letterbox.security.tokens (jwt, cryptography) is imported by each command, so
# the rest of the CLI does not pay for loading it.


@click.group()
def tokens() -> None:
    """Create keys and tokens for token authentication (like `pulsar tokens`)."""



@tokens.command("create-secret-key")
@click.option("--signature-algorithm", "-a", "algorithm", default="HS256", show_default=True,
              type=click.Choice(["HS256", "HS384", "HS512"]))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the key to this file (else to stdout).")
@click.option("--base64", "-b", "as_base64", is_flag=True, help="Encode the key in base64.")
def create_secret_key_cmd(algorithm: str, output: Path | None, as_base64: bool) -> None:
    """A random secret key for HS256/384/512 tokens (the broker's token_secret_key)."""
    from letterbox.security.tokens import create_secret_key

    key = create_secret_key(algorithm)
    data = base64.b64encode(key) if as_base64 else key
    if output is not None:
        output.write_bytes(data)
        output.chmod(0o600)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


@tokens.command("create-key-pair")
@click.option("--signature-algorithm", "-a", "algorithm", default="RS256", show_default=True,
              type=click.Choice(["RS256", "RS384", "RS512", "ES256", "ES384", "ES512"]))
@click.option("--output-private-key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="File for the private key (PKCS#8 DER): signs tokens, keep it secret.")
@click.option("--output-public-key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="File for the public key (X.509 DER): the broker's token_public_key.")
def create_key_pair_cmd(algorithm: str, output_private_key: Path, output_public_key: Path) -> None:
    """A key pair for RS*/ES* tokens."""
    from letterbox.security.tokens import create_key_pair

    private, public = create_key_pair(algorithm)
    output_private_key.write_bytes(private)
    output_private_key.chmod(0o600)
    output_public_key.write_bytes(public)


@tokens.command("create")
@click.option("--subject", "-s", required=True, help="The role the token names (its `sub` claim).")
@click.option("--secret-key", "-sk", help="Sign with this secret key (file:///path, data:, path or base64).")
@click.option("--private-key", "-pk", help="Sign with this private key (file:///path, data:, path or base64).")
@click.option("--expiry-time", "-e", help="Expire after this long: 30s, 10m, 1h, 2d, 1w, 1y (default: never).")
@click.option("--signature-algorithm", "-a", "algorithm",
              help="HS256/384/512 for a secret key; RS*/ES* for a private key [HS256 / RS256 / the curve's ES*].")
@click.option("--headers", "-hs", "headers", type=KEY_VALUE, multiple=True, help="Extra JWT header, key=value.")
def create_cmd(subject: str, secret_key: str | None, private_key: str | None, expiry_time: str | None,
               algorithm: str | None, headers: tuple[tuple[str, str], ...]) -> None:
    """Print a signed token for a role."""
    from letterbox.security.tokens import TokenToolError, create_token, parse_expiry

    try:
        token = create_token(
            subject, secret=secret_key, private=private_key, algorithm=algorithm,
            expiry_seconds=parse_expiry(expiry_time) if expiry_time else None, headers=dict(headers),
        )
    except TokenToolError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(token)


def _token_input(token: str | None, stdin: bool, token_file: Path | None) -> str:
    given = sum(x for x in (token is not None, stdin, token_file is not None))
    if given != 1:
        raise click.UsageError("give the token as an argument, with -i (stdin) or with -f FILE — exactly one")
    if stdin:
        return sys.stdin.read().strip()
    if token_file is not None:
        return token_file.read_text().strip()
    assert token is not None
    return token


_token_args = [
    click.argument("token", required=False),
    click.option("--stdin", "-i", is_flag=True, help="Read the token from stdin."),
    click.option("--token-file", "-f", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                 help="Read the token from this file."),
]


@tokens.command("validate")
@click.option("--secret-key", "-sk", help="The secret key the token must be signed with.")
@click.option("--public-key", "-pk", help="The public key whose private half signed the token.")
@_token_args[0]
@_token_args[1]
@_token_args[2]
def validate_cmd(secret_key: str | None, public_key: str | None, token: str | None, stdin: bool,
                 token_file: Path | None) -> None:
    """Check a token's signature and expiry; print its claims (JSON)."""
    from letterbox.security.tokens import TokenToolError, validate_token

    try:
        claims = validate_token(_token_input(token, stdin, token_file), secret=secret_key, public=public_key)
    except TokenToolError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(claims, sort_keys=True))


@tokens.command("show")
@_token_args[0]
@_token_args[1]
@_token_args[2]
def show_cmd(token: str | None, stdin: bool, token_file: Path | None) -> None:
    """Print a token's header and claims without checking it."""
    from letterbox.security.tokens import TokenToolError, show_token

    try:
        header, claims = show_token(_token_input(token, stdin, token_file))
    except TokenToolError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(header, sort_keys=True))
    click.echo(json.dumps(claims, sort_keys=True))
