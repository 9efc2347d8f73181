# Token tooling behind `letterbox tokens` (the shapes of Pulsar's `pulsar
# tokens`): secret keys for HS256/384/512, key pairs for RS256/384/512 and
# ES256/384/512 (private key PKCS#8 DER, public key X.509 DER, as Pulsar's
# tool writes them; PEM is read too), signed tokens whose `sub` claim is the
# role, with an optional `exp`, and validation with the same key readers the
# broker uses (token_keys.py), so a token the tool accepts is one the broker
# accepts.
from __future__ import annotations

import os
import re
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from letterbox.security.token_keys import (
    EC_ALGORITHMS,
    HMAC_ALGORITHMS,
    RSA_ALGORITHMS,
    KeyMaterialError,
    public_key,
    read_key_bytes,
    secret_key,
)

SECRET_SIZES = {"HS256": 32, "HS384": 48, "HS512": 64}
CURVES: dict[str, ec.EllipticCurve] = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}
_CURVE_ALG = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_EXPIRY_RE = re.compile(r"^(\d+)([smhdwy]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


class TokenToolError(ValueError):
    """What the user gave cannot be used; the message says what to fix."""


def create_secret_key(algorithm: str = "HS256") -> bytes:
    if algorithm not in SECRET_SIZES:
        raise TokenToolError(f"a secret key is for {', '.join(SECRET_SIZES)}, not {algorithm}")
    return os.urandom(SECRET_SIZES[algorithm])


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """(private key PKCS#8 DER, public key X.509 SubjectPublicKeyInfo DER)."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm in RSA_ALGORITHMS:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in CURVES:
        key = ec.generate_private_key(CURVES[algorithm])
    else:
        raise TokenToolError(
            f"a key pair is for {', '.join(RSA_ALGORITHMS + EC_ALGORITHMS)}, not {algorithm}"
        )
    private = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def parse_expiry(text: str) -> int:
    """Pulsar's relative time: `30s`, `10m`, `1h`, `2d`, `1w`, `1y` (a bare number is seconds)."""
    m = _EXPIRY_RE.match(text.strip())
    if not m or int(m.group(1)) <= 0:
        raise TokenToolError(f"expiry time {text!r} is not a positive duration like 30s, 10m, 1h, 2d, 1w or 1y")
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def _signing_key(secret: str | None, private: str | None, algorithm: str | None) -> tuple[Any, str]:
    if (secret is None) == (private is None):
        raise TokenToolError("give exactly one of --secret-key and --private-key")
    try:
        if secret is not None:
            alg = algorithm or "HS256"
            if alg not in HMAC_ALGORITHMS:
                raise TokenToolError(f"a secret key signs {', '.join(HMAC_ALGORITHMS)}, not {alg}")
            return secret_key(secret, "--secret-key").key, alg
        assert private is not None
        raw = read_key_bytes(private, "--private-key")
    except KeyMaterialError as exc:
        raise TokenToolError(str(exc)) from None
    try:
        key: Any = (
            serialization.load_pem_private_key(raw, None)
            if raw.lstrip().startswith(b"-----BEGIN")
            else serialization.load_der_private_key(raw, None)
        )
    except (ValueError, TypeError) as exc:
        raise TokenToolError(f"--private-key: not a PKCS#8 private key (DER or PEM): {exc}") from None
    if isinstance(key, rsa.RSAPrivateKey):
        alg = algorithm or "RS256"
        if alg not in RSA_ALGORITHMS:
            raise TokenToolError(f"an RSA key signs {', '.join(RSA_ALGORITHMS)}, not {alg}")
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        alg = algorithm or _CURVE_ALG.get(key.curve.name, "ES256")
        if alg not in EC_ALGORITHMS:
            raise TokenToolError(f"an EC key signs {', '.join(EC_ALGORITHMS)}, not {alg}")
    else:
        raise TokenToolError(f"--private-key: only RSA and EC keys are supported, got {type(key).__name__}")
    return key, alg


def create_token(
    subject: str,
    *,
    secret: str | None = None,
    private: str | None = None,
    algorithm: str | None = None,
    expiry_seconds: int | None = None,
    headers: dict[str, str] | None = None,
    now: float | None = None,
) -> str:
    if not subject:
        raise TokenToolError("--subject (the role) must not be empty")
    key, alg = _signing_key(secret, private, algorithm)
    claims: dict[str, Any] = {"sub": subject}
    if expiry_seconds is not None:
        claims["exp"] = int((time.time() if now is None else now) + expiry_seconds)
    return jwt.encode(claims, key, algorithm=alg, headers=headers or None)


def validate_token(token: str, *, secret: str | None = None, public: str | None = None) -> dict[str, Any]:
    """The claims of a token signed by the key and not expired; TokenToolError says why not."""
    if (secret is None) == (public is None):
        raise TokenToolError("give exactly one of --secret-key and --public-key")
    try:
        key = secret_key(secret, "--secret-key") if secret is not None else public_key(public or "", "--public-key")
    except KeyMaterialError as exc:
        raise TokenToolError(str(exc)) from None
    try:
        claims: dict[str, Any] = jwt.decode(
            token.strip(), key.key, algorithms=list(key.algorithms), options={"verify_aud": False}
        )
    except jwt.ExpiredSignatureError:
        raise TokenToolError("the token has expired") from None
    except jwt.InvalidSignatureError:
        raise TokenToolError("the token's signature does not match the key") from None
    except jwt.InvalidAlgorithmError:
        raise TokenToolError("the token is signed with an algorithm this key does not verify") from None
    except jwt.PyJWTError as exc:
        raise TokenToolError(f"the token is not valid: {exc}") from None
    return claims


def show_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) without checking the signature."""
    try:
        return jwt.get_unverified_header(token.strip()), jwt.decode(
            token.strip(), options={"verify_signature": False}
        )
    except jwt.PyJWTError as exc:
        raise TokenToolError(f"not a JWT: {exc}") from None
