"""`letterbox tokens` (the shapes of `pulsar tokens`): secret keys and key pairs,
tokens for a role with an optional expiry, validation with the broker's key
readers, and clear refusals for wrong keys, expired tokens and bad input."""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import jwt
from click.testing import CliRunner

from letterbox.cli import main


def _run(*args: str, input: str | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["tokens", *args], input=input)
    return r.exit_code, r.output


def test_secret_key_token_and_validation(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    assert _run("create-secret-key", "--output", str(key))[0] == 0
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    code, token = _run("create", "--secret-key", f"file://{key}", "--subject", "app", "--expiry-time", "1h")
    assert code == 0
    claims = jwt.decode(token.strip(), key.read_bytes(), algorithms=["HS256"])
    assert claims["sub"] == "app" and 3500 < claims["exp"] - time.time() <= 3600
    code, out = _run("validate", "--secret-key", f"file://{key}", token.strip())
    assert code == 0 and json.loads(out)["sub"] == "app"
    code, out = _run("validate", "-sk", f"file://{key}", "-i", input=token)
    assert code == 0 and json.loads(out)["sub"] == "app"
    b64 = tmp_path / "secret.b64"
    assert _run("create-secret-key", "-a", "HS512", "-o", str(b64), "--base64")[0] == 0
    assert len(base64.b64decode(b64.read_text())) == 64
    # the base64 text itself as the key (Pulsar's third form), validates the same
    code, token = _run("create", "-sk", b64.read_text(), "-s", "x")
    assert code == 0 and _run("validate", "-sk", b64.read_text(), token.strip())[0] == 0


def test_key_pairs_sign_and_verify(tmp_path: Path) -> None:
    for alg in ("RS256", "ES256"):
        private, public = tmp_path / f"{alg}.private", tmp_path / f"{alg}.public"
        assert _run("create-key-pair", "-a", alg, "--output-private-key", str(private),
                    "--output-public-key", str(public))[0] == 0
        code, token = _run("create", "--private-key", f"file://{private}", "--subject", "svc")
        assert code == 0 and jwt.get_unverified_header(token.strip())["alg"] == alg
        code, out = _run("validate", "--public-key", f"file://{public}", token.strip())
        assert code == 0 and json.loads(out) == {"sub": "svc"}


def test_refusals_say_why(tmp_path: Path) -> None:
    key, other = tmp_path / "k", tmp_path / "other"
    _run("create-secret-key", "-o", str(key))
    _run("create-secret-key", "-o", str(other))
    token = jwt.encode({"sub": "a", "exp": int(time.time()) - 10}, key.read_bytes(), algorithm="HS256")
    code, out = _run("validate", "-sk", f"file://{key}", token)
    assert code == 1 and "expired" in out
    code, out = _run("validate", "-sk", f"file://{other}", jwt.encode({"sub": "a"}, key.read_bytes()))
    assert code == 1 and "signature does not match" in out
    code, out = _run("create", "-sk", f"file://{key}", "-s", "a", "-e", "soon")
    assert code == 1 and "not a positive duration" in out
    code, out = _run("create", "-s", "a")
    assert code == 1 and "exactly one of --secret-key and --private-key" in out
    code, out = _run("create", "-sk", f"file://{tmp_path}/missing", "-s", "a")
    assert code == 1 and "cannot read key file" in out
    code, out = _run("create", "-sk", f"file://{key}", "-s", "a", "-a", "RS256")
    assert code == 1 and "HS256" in out
    code, out = _run("validate", "-sk", f"file://{key}", "not-a-jwt")
    assert code == 1 and "not valid" in out
    code, out = _run("validate", "-sk", f"file://{key}")
    assert code == 2 and "exactly one" in out
