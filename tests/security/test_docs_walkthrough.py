"""docs/security.md's walk-through, followed literally: every code block between
the walkthrough markers is run in order in an empty directory (shell blocks with
bash -e, the TOML block written to the file its first line names, the Python
block with this interpreter); the `letterbox standalone` block is started in the
background and stopped at the end. Only the ports 6651 and 8443 are replaced by
free ones."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BLOCK_RE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    start, end = text.index("<!-- walkthrough:start -->"), text.index("<!-- walkthrough:end -->")
    return BLOCK_RE.findall(text[start:end])


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the broker exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def test_walkthrough_runs_as_written(tmp_path: Path) -> None:
    blocks = _blocks()
    assert [kind for kind, _ in blocks] == ["sh", "sh", "toml", "sh", "sh", "python", "sh"]
    ports = {"6651": str(_free_port()), "8443": str(_free_port())}
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("LETTERBOX_AUTH_TOKEN", None)
    broker: subprocess.Popen[bytes] | None = None
    log = tmp_path / "broker.log"
    try:
        for kind, body in blocks:
            for old, new in ports.items():
                body = body.replace(old, new)
            if kind == "toml":
                name = body.splitlines()[0].lstrip("# ").strip()
                (tmp_path / name).write_text(body)
            elif kind == "python":
                out = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, out.stderr
                assert "b'order 1'" in out.stdout
            elif body.startswith("letterbox standalone"):
                with open(log, "wb") as fh:
                    broker = subprocess.Popen(["bash", "-c", "exec " + body], cwd=tmp_path, env=env,
                                              stdout=fh, stderr=subprocess.STDOUT)
                for port in ports.values():
                    _wait_port(int(port), broker)
            else:
                out = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=180)
                assert out.returncode == 0, f"{body}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
                if "grant-permission" in body:
                    assert "app: consume, produce" in out.stdout
                if "tokens validate" in body:
                    assert '"sub": "app"' in out.stdout
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            try:
                assert broker.wait(20) == 0, log.read_text()
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
                raise
