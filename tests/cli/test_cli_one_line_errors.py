"""Bad input on the command line gets one line naming the fix and exit status 2, never a
traceback, and a token is never echoed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import closed_port

SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig"


def letterbox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    clean.update(env or {})
    return subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True,
                          timeout=60, env=clean)


def one_line_usage_error(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def admin_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


def test_a_token_file_that_is_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "bad.token"
    bad.write_bytes(b"\xff\xfe\x00" + SECRET.encode())
    proc = letterbox("admin", "--admin-url", admin_url(), "--auth-token-file", str(bad), "tenants", "list")
    one_line_usage_error(proc, str(bad), "not UTF-8", "write only the token")


@pytest.mark.parametrize("token", [SECRET + "\n" + SECRET, SECRET[:10] + " " + SECRET[10:], SECRET + "\x00"])
def test_a_token_with_a_line_break_is_not_echoed(tmp_path: Path, token: str) -> None:
    path = tmp_path / "two-lines.token"
    path.write_text(token + "\n")
    proc = letterbox("admin", "--admin-url", admin_url(), "--auth-token-file", str(path), "tenants", "list")
    line = one_line_usage_error(proc, "line break", "keep only the token")
    assert SECRET[:12] not in line and "sig" not in line
    proc = letterbox("produce", "orders", "-m", "x", "--service-url", f"pulsar://127.0.0.1:{closed_port()}",
                     env={"LETTERBOX_AUTH_TOKEN": token.replace("\x00", "\x01")})
    line = one_line_usage_error(proc, "--auth-token")
    assert SECRET[:12] not in line


def test_trust_certs_that_are_not_pem(tmp_path: Path) -> None:
    ca = tmp_path / "ca.der"
    ca.write_bytes(b"\x30\x82\x01\x0a not a certificate")
    proc = letterbox("admin", "--admin-url", admin_url(), "--tls-trust-certs", str(ca), "tenants", "list")
    one_line_usage_error(proc, str(ca), "no PEM certificate")


@pytest.mark.parametrize("since", ["99999999999d", "9999999999h"])
def test_since_that_reaches_before_1970(since: str) -> None:
    proc = letterbox("dlq", "--admin-url", admin_url(), "redrive", "orders-sub-DLQ", "--dry-run", "--since", since)
    one_line_usage_error(proc, since, "before 1970", "shorter duration")
