# How a letterbox tool or library authenticates to a broker, in the official
# client's terms: an authentication plugin name and its parameter string
# (Pulsar's authPlugin / authParams) plus the CA file that the broker's TLS
# certificate must chain to (tlsTrustCertsFilePath). One AuthOptions gives
# both sides of a connection the same identity:
#   * client_kwargs() -> keyword arguments for pulsar.Client (authentication,
#     tls_trust_certs_file_path);
#   * http_headers() / ssl_context() -> the admin HTTP calls' Authorization
#     header and TLS context (client certificate included for the tls plugin).
# Plugins: "token" (params "token:<jwt>", "file:///path", or the token text;
# a callable supplier is accepted through from_token), "basic" (params JSON
# {"userId", "password"} as Pulsar's AuthenticationBasic), "tls" (params
# "tlsCertFile:<path>,tlsKeyFile:<path>"); Pulsar's class names for the three
# are accepted too. The token of a file:// parameter is read at each use, so a
# rotated file is picked up.
from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLUGINS = {
    "token": "token",
    "basic": "basic",
    "tls": "tls",
    "org.apache.pulsar.client.impl.auth.AuthenticationToken": "token",
    "org.apache.pulsar.client.impl.auth.AuthenticationBasic": "basic",
    "org.apache.pulsar.client.impl.auth.AuthenticationTls": "tls",
}


class AuthOptionsError(ValueError):
    """The plugin or its parameters cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class AuthOptions:
    plugin: str = ""  # "" none, else a key of PLUGINS
    params: str = ""
    tls_trust_certs_file_path: str = ""
    token_supplier: Callable[[], str] | None = None

    @classmethod
    def from_token(
        cls, token: str | Callable[[], str] | None, tls_trust_certs_file_path: str = ""
    ) -> AuthOptions:
        if token is None:
            return cls(tls_trust_certs_file_path=tls_trust_certs_file_path)
        if callable(token):
            return cls("token", "", tls_trust_certs_file_path, token)
        return cls("token", "token:" + token, tls_trust_certs_file_path)

    def __post_init__(self) -> None:
        if self.plugin and self.plugin not in PLUGINS:
            raise AuthOptionsError(
                f"unknown authentication plugin {self.plugin!r}; use one of token, basic, tls "
                "(or their org.apache.pulsar.client.impl.auth class names)"
            )
        if self.tls_trust_certs_file_path and not Path(self.tls_trust_certs_file_path).is_file():
            raise AuthOptionsError(f"TLS trust certs file {self.tls_trust_certs_file_path!r} does not exist")
        if self.kind == "basic":
            self._basic()
        if self.kind == "tls":
            self._tls_files()

    @property
    def kind(self) -> str:
        return PLUGINS.get(self.plugin, "")

    # --- the parts -----------------------------------------------------------------------
    def token(self) -> str:
        if self.token_supplier is not None:
            return self.token_supplier()
        params = self.params.strip()
        if params.startswith("token:"):
            return params[len("token:"):].strip()
        if params.startswith("file:"):
            path = urllib.parse.unquote(urllib.parse.urlsplit(params).path)
            try:
                return Path(path).read_text().strip()
            except OSError as exc:
                raise AuthOptionsError(f"cannot read the token file {path}: {exc.strerror}") from None
        if params.startswith("{"):
            value = _json(params, "token").get("token")
            if not isinstance(value, str):
                raise AuthOptionsError('token auth params JSON needs a "token" string')
            return value
        if not params:
            raise AuthOptionsError("token authentication needs a token (params 'token:<jwt>' or 'file:///path')")
        return params

    def _basic(self) -> tuple[str, str]:
        doc = _json(self.params, "basic")
        user, password = doc.get("userId"), doc.get("password")
        if not isinstance(user, str) or not isinstance(password, str):
            raise AuthOptionsError('basic auth params must be JSON {"userId": "...", "password": "..."}')
        return user, password

    def _tls_files(self) -> tuple[str, str]:
        fields = dict(part.split(":", 1) for part in self.params.split(",") if ":" in part)
        cert, key = fields.get("tlsCertFile", "").strip(), fields.get("tlsKeyFile", "").strip()
        if not cert or not key:
            raise AuthOptionsError("tls auth params must be 'tlsCertFile:<path>,tlsKeyFile:<path>'")
        return cert, key

    # --- for a CONNECT of our own (migrate's probe) -----------------------------------------
    def binary_credentials(self) -> tuple[str, bytes] | None:
        """(auth_method_name, auth_data) as the official clients put them in CONNECT; a tls
        identity is the certificate of the TLS context (ssl_context)."""
        if self.kind == "token":
            return "token", self.token().encode()
        if self.kind == "basic":
            user, password = self._basic()
            return "basic", f"{user}:{password}".encode()
        if self.kind == "tls":
            return "tls", b""
        return None

    # --- for pulsar.Client ---------------------------------------------------------------
    def pulsar_authentication(self) -> Any:
        import pulsar

        if self.kind == "token":
            return pulsar.AuthenticationToken(self.token_supplier or self.token())
        if self.kind == "basic":
            user, password = self._basic()
            return pulsar.AuthenticationBasic(user, password)
        if self.kind == "tls":
            return pulsar.AuthenticationTLS(*self._tls_files())
        return None

    def client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        auth = self.pulsar_authentication()
        if auth is not None:
            kwargs["authentication"] = auth
        if self.tls_trust_certs_file_path:
            kwargs["tls_trust_certs_file_path"] = self.tls_trust_certs_file_path
        return kwargs

    def spark_options(self) -> dict[str, str]:
        """The same identity as options of the letterbox Spark data source."""
        if self.token_supplier is not None:
            raise AuthOptionsError("a token supplier cannot be passed to Spark; give the token or a file:// URL")
        out = {"auth_plugin": self.plugin, "auth_params": self.params,
               "tls_trust_certs_file_path": self.tls_trust_certs_file_path}
        return {k: v for k, v in out.items() if v}

    # --- for admin HTTP calls --------------------------------------------------------------
    def http_headers(self) -> dict[str, str]:
        if self.kind == "token":
            return {"Authorization": f"Bearer {self.token()}"}
        if self.kind == "basic":
            user, password = self._basic()
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The context for https:// admin calls (None: the default verification)."""
        if not self.tls_trust_certs_file_path and self.kind != "tls":
            return None
        ctx = ssl.create_default_context(cafile=self.tls_trust_certs_file_path or None)
        if self.kind == "tls":
            ctx.load_cert_chain(*self._tls_files())
        return ctx


def _json(params: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(params)
    except json.JSONDecodeError as exc:
        raise AuthOptionsError(f"{what} auth params are not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise AuthOptionsError(f"{what} auth params must be a JSON object")
    return doc
