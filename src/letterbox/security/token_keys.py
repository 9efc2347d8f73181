# Key material for JWT validation, read the way Pulsar reads tokenSecretKey /
# tokenPublicKey: `data:[<mediatype>][;base64],<data>`, `file:///path`, a
# plain path to an existing file, or else the key itself in base64. A secret
# key is raw bytes (HS256/384/512); a public key is X.509 SubjectPublicKeyInfo,
# DER (as `pulsar tokens create-key-pair` writes it) or PEM, RSA or EC.
#
# Invariant: every failure is a KeyMaterialError whose message names the
# setting and what is wrong, so a bad key stops the broker at start-up.
from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")


class KeyMaterialError(ValueError):
    """A key setting cannot be read or decoded; the message names the setting."""


@dataclass(frozen=True)
class ValidationKey:
    key: Any  # bytes (HMAC) or a cryptography public key object
    algorithms: tuple[str, ...]


def read_key_bytes(value: str, setting: str) -> bytes:
    """The bytes a Pulsar key URL designates."""
    value = value.strip()
    if value.startswith("data:"):
        header, sep, data = value.partition(",")
        if not sep:
            raise KeyMaterialError(f"{setting}: a data: URL needs a ',' before the data")
        if header.endswith(";base64"):
            try:
                return base64.b64decode(data, validate=True)
            except binascii.Error as exc:
                raise KeyMaterialError(f"{setting}: the data: URL is not valid base64 ({exc})") from None
        return urllib.parse.unquote_to_bytes(data)
    if value.startswith("file:"):
        parsed = urllib.parse.urlparse(value)
        path = Path(urllib.parse.unquote(parsed.path or parsed.netloc))
        return _read(path, setting)
    path = Path(value)
    if path.is_file():
        return _read(path, setting)
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise KeyMaterialError(
            f"{setting}: {value!r} is neither an existing file, a file:// or data: URL, nor base64"
        ) from None


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyMaterialError(f"{setting}: cannot read key file {path}: {exc.strerror}") from None


def secret_key(value: str, setting: str = "token_secret_key") -> ValidationKey:
    key = read_key_bytes(value, setting)
    if not key:
        raise KeyMaterialError(f"{setting}: the secret key is empty")
    return ValidationKey(key, HMAC_ALGORITHMS)


def public_key(value: str, setting: str = "token_public_key") -> ValidationKey:
    # cryptography is imported only where a public key is configured: a broker without one
    # starts without it
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    raw = read_key_bytes(value, setting)
    try:
        key: Any = (
            load_pem_public_key(raw) if raw.lstrip().startswith(b"-----BEGIN") else load_der_public_key(raw)
        )
    except ValueError as exc:
        raise KeyMaterialError(f"{setting}: not an X.509 public key (DER or PEM): {exc}") from None
    if isinstance(key, rsa.RSAPublicKey):
        return ValidationKey(key, RSA_ALGORITHMS)
    if isinstance(key, ec.EllipticCurvePublicKey):
        return ValidationKey(key, EC_ALGORITHMS)
    raise KeyMaterialError(f"{setting}: only RSA and EC public keys are supported, got {type(key).__name__}")
