"""Test-time PKI and tokens: a CA, a broker certificate for 127.0.0.1/localhost,
client certificates with a chosen CN, JWT keys. Everything is generated with
`cryptography` into a temporary directory; nothing is checked in."""
from __future__ import annotations

import datetime
import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

_NOW = datetime.datetime.now(datetime.UTC)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    return path


@dataclass
class CertPair:
    cert: Path
    key: Path


class Pki:
    def __init__(self, root: Path, ca_name: str = "letterbox test CA") -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
            .public_key(self.ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - datetime.timedelta(days=1))
            .not_valid_after(_NOW + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .sign(self.ca_key, hashes.SHA256())
        )
        self.ca = root / f"{ca_name.replace(' ', '-')}.pem"
        self.ca.write_bytes(self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, server: bool) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(self.ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - datetime.timedelta(days=1))
            .not_valid_after(_NOW + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ), critical=False)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
            ]), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        pem = self.root / f"{cn}.cert.pem"
        pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return CertPair(pem, _write_key(key, self.root / f"{cn}.key.pem"))


class TokenKeys:
    """An HS256 secret and an RS256 key pair, written as Pulsar writes them
    (raw secret bytes; DER public key)."""

    def __init__(self, root: Path) -> None:
        self.secret = b"letterbox-test-secret-0123456789abcdef"
        self.secret_file = root / "secret.key"
        self.secret_file.write_bytes(self.secret)
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_file = root / "public.key"
        self.public_file.write_bytes(self.rsa.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))

    def hs256(self, sub: str, expires_in: float | None = None, secret: bytes | None = None) -> str:
        return jwt.encode(_claims(sub, expires_in), secret or self.secret, algorithm="HS256")

    def rs256(self, sub: str, expires_in: float | None = None) -> str:
        return jwt.encode(_claims(sub, expires_in), self.rsa, algorithm="RS256")


def _claims(sub: str, expires_in: float | None) -> dict[str, object]:
    claims: dict[str, object] = {"sub": sub}
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in)
    return claims
