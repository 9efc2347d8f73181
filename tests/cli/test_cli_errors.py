"""What the commands say when the broker is not running or the arguments are
wrong: a sentence naming the problem and a non-zero exit. The broker-down
cases run the real `letterbox` entry point in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli.helpers import closed_port, run


def letterbox(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    return subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("command", [
    ["admin", "tenants", "list"],
    ["admin", "topics", "stats", "orders"],
    ["dlq", "list", "public/default"],
    ["dlq", "redrive", "orders-sub-DLQ", "--dry-run"],
])
def test_admin_commands_say_the_broker_is_not_running(command: list[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    proc = letterbox(command[0], "--admin-url", url, *command[1:])
    assert proc.returncode == 1
    assert f"cannot reach the letterbox admin API at {url}: is the broker running?" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_admin_url_from_the_environment() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    env["LETTERBOX_ADMIN_URL"] = url
    proc = subprocess.run([sys.executable, "-m", "letterbox", "admin", "tenants", "list"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    assert f"at {url}: is the broker running?" in proc.stderr


@pytest.mark.parametrize("command", [
    ["produce", "orders", "-m", "hello"],
    ["consume", "orders", "-s", "sub"],
])
def test_client_commands_say_the_broker_is_not_running(command: list[str]) -> None:
    url = f"pulsar://127.0.0.1:{closed_port()}"
    proc = letterbox(*command, "--service-url", url, "--timeout-connect", "1")
    assert proc.returncode == 1
    assert f"cannot reach the letterbox broker at {url}" in proc.stderr
    assert "is the broker running?" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_admin_url_is_a_usage_error() -> None:
    result = run("admin", "--admin-url", "localhost:8080", "tenants", "list")
    assert result.exit_code == 2
    assert "invalid admin URL 'localhost:8080'" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["admin", "topics", "stats", "a/b"], "use 'topic', 'tenant/namespace/topic'"),
    (["admin", "topics", "create", "kafka://x/y/z"], "use persistent:// or non-persistent://"),
    (["admin", "namespaces", "create", "justone"], "expected TENANT/NAMESPACE"),
    (["admin", "topics", "create-partitioned-topic", "t", "-p", "0"], "0 is not in the range x>=1"),
    (["admin", "topics", "reset-cursor", "t", "-s", "sub"], "exactly one of --time/-t or --messageId/-m"),
    (["admin", "topics", "reset-cursor", "t", "-s", "sub", "-t", "soon"], "epoch milliseconds"),
    (["admin", "topics", "expire-messages", "t", "-s", "sub", "-t", "1x"], "30s, 10m, 1h"),
    (["admin", "namespaces", "set-retention", "public/default", "-t", "1h", "-s", "lots"], "10M, 16G"),
    (["admin", "namespaces", "set-deduplication", "public/default"], "--enable or --disable"),
    (["admin", "topics", "skip", "t", "-s", "sub"], "Missing option '--count'"),
    (["dlq", "redrive", "t-DLQ", "--property", "novalue"], "expected key=value"),
    (["dlq", "redrive", "t-DLQ", "--since", "1h", "--until", "2h"], "--since must be earlier than --until"),
    (["produce", "t"], "give at least one -m MESSAGE or -f FILE"),
    (["produce", "t", "-m", "x", "-p", "oops"], "expected key=value"),
    (["consume", "t"], "Missing option '--subscription-name'"),
    (["consume", "t", "-s", "x", "-t", "round_robin"], "'round_robin' is not one of"),
])
def test_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    # The admin URL points nowhere: a usage error must come before any request.
    if args[0] in ("admin", "dlq"):
        args = [args[0], "--admin-url", f"http://127.0.0.1:{closed_port()}", *args[1:]]
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
