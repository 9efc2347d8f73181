"""Run `letterbox ...` in-process with click's runner, against a broker's URLs."""
from __future__ import annotations

import json
import socket
from typing import Any

from click.testing import CliRunner, Result

from letterbox.cli import main
from tests.conftest import BrokerProcess


def run(*args: str, input: str | None = None) -> Result:
    """`letterbox ARGS`; the env never points elsewhere (LETTERBOX_* cleared)."""
    env = {"LETTERBOX_ADMIN_URL": None, "LETTERBOX_SERVICE_URL": None}
    return CliRunner().invoke(main, list(args), input=input, env=env, catch_exceptions=False)


def admin(broker: BrokerProcess, *args: str, input: str | None = None) -> Result:
    return run("admin", "--admin-url", broker.admin_url, *args, input=input)


def dlq(broker: BrokerProcess, *args: str, input: str | None = None) -> Result:
    return run("dlq", "--admin-url", broker.admin_url, *args, input=input)


def ok(result: Result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def ok_json(result: Result) -> Any:
    return json.loads(ok(result))


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
