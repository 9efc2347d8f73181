"""--auth-token / --auth-token-file / LETTERBOX_AUTH_TOKEN and --tls-trust-certs
reach the admin API calls as an Authorization header (checked against a local
HTTP server that records the header), and wrong combinations are refused."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from letterbox.cli import main


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(self.headers.get("Authorization"))
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_token_flags_and_env_reach_the_admin_call(recorder: str, tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["admin", "--admin-url", recorder, "--auth-token", "t1", "tenants", "list"], env={})
    assert r.exit_code == 0, r.output
    token_file = tmp_path / "t.jwt"
    token_file.write_text("t2\n")
    r = runner.invoke(main, ["dlq", "--admin-url", recorder, "--auth-token-file", str(token_file),
                             "list", "public/default"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["admin", "--admin-url", recorder, "tenants", "list"], env={"LETTERBOX_AUTH_TOKEN": "t3"})
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["admin", "--admin-url", recorder, "tenants", "list"], env={"LETTERBOX_AUTH_TOKEN": None})
    assert r.exit_code == 0, r.output
    assert _Recorder.seen == ["Bearer t1", "Bearer t2", "Bearer t3", None]


def test_both_token_options_are_refused(recorder: str, tmp_path: Path) -> None:
    token_file = tmp_path / "t.jwt"
    token_file.write_text("t2")
    r = CliRunner().invoke(main, ["admin", "--admin-url", recorder, "--auth-token", "a",
                                  "--auth-token-file", str(token_file), "tenants", "list"])
    assert r.exit_code == 2 and "not both" in r.output
    r = CliRunner().invoke(main, ["produce", "--tls-trust-certs", str(tmp_path / "missing.pem"), "t", "-m", "x"])
    assert r.exit_code == 2 and "missing.pem" in r.output
