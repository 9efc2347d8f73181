# Username/password checking against an htpasswd file, as Pulsar's basic
# authentication provider reads it: one `user:hash` per line, hashes in
# Apache's `$apr1$` MD5 or crypt(3) forms (`$1$` MD5, `$5$` SHA-256, `$6$`
# SHA-512, traditional DES); bcrypt (`$2y$`, `$2b$`, `$2a$`) is accepted too.
#
# Invariants: the file is read once, at start-up; check() never raises for a
# wrong password, it returns the reason the login fails (None = accepted);
# comparisons of computed hashes are constant-time.
from __future__ import annotations

import hashlib
import hmac
import warnings
from collections.abc import Callable
from typing import Any

import bcrypt

from letterbox.security.token_keys import KeyMaterialError, read_key_bytes

_ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class HtpasswdError(ValueError):
    """The htpasswd file cannot be read or has a malformed line; the message says where."""


def load_htpasswd(value: str, setting: str = "basic_auth_conf") -> Htpasswd:
    if not value.startswith(("data:", "file:")) and not _exists(value):
        raise HtpasswdError(f"{setting}: no such htpasswd file {value!r}")
    try:
        data = read_key_bytes(value, setting)
    except KeyMaterialError as exc:
        raise HtpasswdError(str(exc)) from None
    return Htpasswd.parse(data.decode("utf-8", errors="replace"), setting)


def _exists(path: str) -> bool:
    from pathlib import Path

    return Path(path).is_file()


class Htpasswd:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users

    @classmethod
    def parse(cls, text: str, source: str = "htpasswd") -> Htpasswd:
        users: dict[str, str] = {}
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, hashed = line.partition(":")
            if not sep or not user or not hashed:
                raise HtpasswdError(f"{source} line {lineno}: expected user:hash")
            users[user] = hashed
        return cls(users)

    def check(self, user: str, password: str) -> str | None:
        """None when the password is right, else the reason it is refused."""
        hashed = self.users.get(user)
        if hashed is None:
            return f"no such user {user!r}"
        try:
            ok = verify_password(password, hashed)
        except ValueError as exc:
            return f"cannot check the password of {user!r}: {exc}"
        return None if ok else f"wrong password for user {user!r}"


def verify_password(password: str, hashed: str) -> bool:
    pw = password.encode()
    if hashed.startswith(("$2y$", "$2b$", "$2a$")):
        # bcrypt treats $2y$ as $2b$ (the same algorithm; PHP and Apache write 2y)
        normalized = "$2b$" + hashed[4:] if hashed.startswith("$2y$") else hashed
        try:
            return bcrypt.checkpw(pw, normalized.encode())
        except ValueError as exc:
            raise ValueError(f"malformed bcrypt hash ({exc})") from None
    for magic in ("$apr1$", "$1$"):
        if hashed.startswith(magic):
            salt = hashed[len(magic) :].split("$", 1)[0]
            return _same(md5_crypt(pw, salt.encode(), magic.encode()), hashed)
    return _same(_system_crypt()(password, hashed) or "", hashed)


def _same(computed: str, hashed: str) -> bool:
    """Constant-time equality on bytes (compare_digest refuses non-ASCII str)."""
    return hmac.compare_digest(computed.encode(), hashed.encode())


def _system_crypt() -> Callable[[str, str], str | None]:
    """crypt(3) for $5$/$6$/DES hashes (the stdlib module, deprecated in 3.11)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt as crypt_module
        except ImportError:
            raise ValueError(
                "this Python has no crypt module; use $apr1$ (htpasswd -m) or bcrypt (htpasswd -B)"
            ) from None
    fn: Any = crypt_module.crypt
    return fn  # type: ignore[no-any-return]


def md5_crypt(pw: bytes, salt: bytes, magic: bytes) -> str:
    """The MD5-based crypt of FreeBSD ($1$) and Apache ($apr1$)."""
    salt = salt[:8]
    alternate = hashlib.md5(pw + salt + pw).digest()
    ctx = pw + magic + salt
    for left in range(len(pw), 0, -16):
        ctx += alternate[: min(16, left)]
    i = len(pw)
    while i:
        ctx += b"\x00" if i & 1 else pw[:1]
        i >>= 1
    final = hashlib.md5(ctx).digest()
    for i in range(1000):
        step = pw if i & 1 else final
        if i % 3:
            step += salt
        if i % 7:
            step += pw
        step += final if i & 1 else pw
        final = hashlib.md5(step).digest()
    out = []
    for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)):
        out.append(_to64((final[a] << 16) | (final[b] << 8) | final[c], 4))
    out.append(_to64(final[11], 2))
    return f"{magic.decode()}{salt.decode()}${''.join(out)}"


def _to64(value: int, n: int) -> str:
    chars = []
    for _ in range(n):
        chars.append(_ITOA64[value & 0x3F])
        value >>= 6
    return "".join(chars)
