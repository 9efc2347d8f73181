"""An admin API client for the security tests: (status, headers, parsed JSON or
text), with an optional Authorization header and TLS context."""
from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any


def call(
    base: str, method: str, path: str, body: Any = None, *, token: str | None = None,
    auth: str | None = None, context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if auth is not None:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            status, headers, raw = resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as exc:
        status, headers, raw = exc.code, dict(exc.headers.items()), exc.read()
    text = raw.decode()
    if "json" in headers.get("Content-Type", "") and text:
        return status, headers, json.loads(text)
    return status, headers, text
