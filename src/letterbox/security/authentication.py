# Authentication, as Pulsar's authenticationProviders: `token` (JWT signed
# with tokenSecretKey or the private half of tokenPublicKey; the role is the
# tokenAuthClaim claim, `sub` by default; `exp` honoured), `basic` (user and
# password against an htpasswd file) and `tls` (the common name of a verified
# client certificate). Any combination may be on at once; a client picks one
# by the method name it sends (auth_method_name on CONNECT, the HTTP scheme on
# the admin API).
#
# Invariants: keys and the htpasswd file are read once, in __init__, and a bad
# one is a ConfigError naming the setting; authenticate() either returns a
# role or raises AuthenticationFailed whose message says why (unknown
# signature, expired, no such user, wrong password...) and never includes the
# secret itself; with no credentials the result is anonymous_user_role or a
# refusal. PyJWT (cryptography.x509 under it, half of a broker's import time)
# is imported by the first token check: a broker without tokens never needs it.
from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from letterbox.config import ConfigError
from letterbox.errors import LetterboxError, ServerError
from letterbox.security.htpasswd import Htpasswd, HtpasswdError, load_htpasswd
from letterbox.security.token_keys import KeyMaterialError, ValidationKey, public_key, secret_key

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig

NO_METHOD = ("", "none")  # what a client without an authentication plugin sends


class AuthenticationFailed(LetterboxError):
    code = ServerError.AuthenticationError


@dataclass(frozen=True)
class Credentials:
    method: str  # "token" | "basic" | "tls" | "" (none given)
    data: bytes  # auth_data as sent (token text, "user:password", b"")
    peer_common_name: str | None = None  # CN of a verified client certificate


@dataclass(frozen=True)
class Session:
    """Who a connection is, and until when its credentials are good."""

    role: str
    method: str
    expires_at: float | None = None  # epoch seconds (a token's exp), None: never


class AuthenticationService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.enabled = config.authentication_enabled
        self.anonymous_role = config.anonymous_user_role or None
        self._providers: dict[str, Callable[[Credentials], Session]] = {}
        self._token_keys: list[ValidationKey] = []
        self._htpasswd: Htpasswd | None = None
        for name in config.auth_provider_names():
            if name == "token":
                self._token_keys = _token_keys(config)
                self._providers["token"] = self._authenticate_token
            elif name == "basic":
                try:
                    self._htpasswd = load_htpasswd(config.basic_auth_conf)
                except HtpasswdError as exc:
                    raise ConfigError(str(exc)) from None
                self._providers["basic"] = self._authenticate_basic
            elif name == "tls":
                self._providers["tls"] = self._authenticate_tls

    @property
    def methods(self) -> list[str]:
        return list(self._providers)

    def authenticate(self, creds: Credentials) -> str:
        """The role these credentials prove; AuthenticationFailed(reason) otherwise."""
        return self.authenticate_session(creds).role

    def authenticate_session(self, creds: Credentials) -> Session:
        method = creds.method.strip().lower()
        provider = self._providers.get(method)
        if provider is not None:
            return provider(creds)
        if self.anonymous_role is not None:
            return Session(self.anonymous_role, "anonymous")
        accepted = ", ".join(self.methods) or "none"
        if method in NO_METHOD:
            raise AuthenticationFailed(
                f"Authentication required: this broker accepts {accepted} and has no anonymous role"
            )
        raise AuthenticationFailed(
            f"Unsupported authentication method {creds.method!r}: this broker accepts {accepted}"
        )

    # --- providers ------------------------------------------------------------------
    def _authenticate_token(self, creds: Credentials) -> Session:
        token = creds.data.decode("utf-8", errors="replace").strip()
        if token.lower().startswith("bearer "):
            token = token[7:].strip()
        if not token:
            raise AuthenticationFailed("Token authentication failed: no token was sent")
        claims = self._verified_claims(token)
        role = _role_claim(claims, self.config.token_auth_claim)
        if role is None:
            raise AuthenticationFailed(
                f"Token authentication failed: the token has no {self.config.token_auth_claim!r} "
                "claim naming a role"
            )
        if self.config.token_audience:
            audience = claims.get(self.config.token_audience_claim)
            names = audience if isinstance(audience, list) else [audience]
            if self.config.token_audience not in names:
                raise AuthenticationFailed(
                    f"Token authentication failed: the token's {self.config.token_audience_claim!r} "
                    f"claim does not include {self.config.token_audience!r}"
                )
        exp = claims.get("exp")
        return Session(role, "token", float(exp) if isinstance(exp, int | float) else None)

    def _verified_claims(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            alg = str(jwt.get_unverified_header(token).get("alg"))
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed(f"Token authentication failed: not a valid JWT ({exc})") from None
        keys = [k for k in self._token_keys if alg in k.algorithms]
        if not keys:
            accepted = ", ".join(a for k in self._token_keys for a in k.algorithms)
            raise AuthenticationFailed(
                f"Token authentication failed: the token is signed with {alg}; the broker's "
                f"keys verify {accepted}"
            )
        for key in keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token, key.key, algorithms=[alg], options={"verify_aud": False}, leeway=0
                )
                return claims
            except jwt.InvalidSignatureError:
                continue  # maybe the next key
            except jwt.ExpiredSignatureError:
                raise AuthenticationFailed(
                    f"Token authentication failed: the token expired at {_expiry_text(token)}"
                ) from None
            except jwt.ImmatureSignatureError:
                raise AuthenticationFailed(
                    "Token authentication failed: the token is not valid yet (nbf/iat in the future)"
                ) from None
            except jwt.DecodeError as exc:
                raise AuthenticationFailed(f"Token authentication failed: not a valid JWT ({exc})") from None
            except jwt.InvalidTokenError as exc:
                raise AuthenticationFailed(f"Token authentication failed: {exc}") from None
        raise AuthenticationFailed(
            "Token authentication failed: the token's signature does not match the broker's key "
            "(signed with another key)"
        )

    def _authenticate_basic(self, creds: Credentials) -> Session:
        assert self._htpasswd is not None
        text = creds.data.decode("utf-8", errors="replace")
        user, sep, password = text.partition(":")
        if not sep or not user:
            raise AuthenticationFailed(
                "Basic authentication failed: credentials must be 'user:password'"
            )
        reason = self._htpasswd.check(user, password)
        if reason is not None:
            raise AuthenticationFailed(f"Basic authentication failed: {reason}")
        return Session(user, "basic")

    def _authenticate_tls(self, creds: Credentials) -> Session:
        if not creds.peer_common_name:
            raise AuthenticationFailed(
                "TLS authentication failed: no verified client certificate with a common name "
                "was presented (connect over TLS with a certificate signed by the broker's "
                "trusted CA)"
            )
        return Session(creds.peer_common_name, "tls")


def _token_keys(config: BrokerConfig) -> list[ValidationKey]:
    keys: list[ValidationKey] = []
    try:
        if config.token_secret_key:
            keys.append(secret_key(config.token_secret_key))
        if config.token_public_key:
            keys.append(public_key(config.token_public_key))
    except KeyMaterialError as exc:
        raise ConfigError(str(exc)) from None
    return keys


def _role_claim(claims: dict[str, Any], name: str) -> str | None:
    value = claims.get(name)
    if isinstance(value, list) and value:  # Pulsar takes the first of a list
        value = value[0]
    return value if isinstance(value, str) and value else None


def _expiry_text(token: str) -> str:
    import jwt

    try:
        exp: Any = jwt.decode(token, options={"verify_signature": False}).get("exp")
        return datetime.datetime.fromtimestamp(float(exp), datetime.UTC).isoformat(timespec="seconds")
    except (jwt.InvalidTokenError, TypeError, ValueError):
        return "an unknown time"
