"""The CLI refuses what cannot be meant: a misspelt --reason, a redrive or purge of a topic
that is not a dead letter topic, a purge confirmation with no terminal to give it. Each is
one `Error:` line naming the fix, exit status 2, and the broker's data is unchanged. Every
--service-url / --admin-url option of every command reads the same environment variable
with the same 127.0.0.1 default, and `make run` takes PORT and ADMIN_PORT."""
from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import click
import pulsar
import pytest

from letterbox.cli import main
from letterbox.default_urls import DEFAULT_ADMIN_URL, DEFAULT_SERVICE_URL
from tests.cli.helpers import dlq, ok_json, run
from tests.conftest import BrokerProcess

SRC = "persistent://public/default/cli-refusals-src"
DLQ = "persistent://public/default/cli-refusals-src-work-DLQ"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def topics(broker: BrokerProcess) -> None:
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    client.subscribe(SRC, "work").close()  # the backlog the refused commands must not touch
    source = client.create_producer(SRC)
    for i in range(3):
        source.send(f"work {i}".encode())
    dead = client.create_producer(DLQ)
    for i in range(2):
        dead.send(f"dead {i}".encode(), properties={"DEAD_LETTER_REASON": "terminated", "REAL_TOPIC": SRC})
    client.close()


def _counts(broker: BrokerProcess) -> tuple[int, int]:
    """(backlog of the source topic's subscription, dead letters in the DLQ)."""
    dead = ok_json(dlq(broker, "purge", DLQ, "--dry-run", "-o", "json"))
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/persistent/public/default/"
                                "cli-refusals-src/stats", timeout=10) as resp:
        src = json.loads(resp.read())
    return int(src["subscriptions"]["work"]["msgBacklog"]), int(dead["purged"])


def _refused(result: click.testing.Result, *needles: str) -> None:
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.stdout} {result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.mark.parametrize("command", [["redrive", DLQ], ["purge", DLQ, "--yes"], ["peek", DLQ]])
def test_a_misspelt_reason_lists_the_valid_ones(broker: BrokerProcess, topics: None, command: list[str]) -> None:
    before = _counts(broker)
    _refused(dlq(broker, *command, "--reason", "max-redelivery"),
             "'max-redelivery' is not one of", "'max-redeliveries'", "'terminated'", "'expired'")
    assert _counts(broker) == before


@pytest.mark.parametrize("command", [["purge", SRC, "--yes"], ["redrive", SRC], ["redrive", SRC, "--dry-run"]])
def test_a_topic_that_is_not_a_dead_letter_topic_is_refused(broker: BrokerProcess, topics: None,
                                                            command: list[str]) -> None:
    before = _counts(broker)
    _refused(dlq(broker, *command), f"{SRC} is not a dead letter topic",
             "cli-refusals-src-<subscription>-DLQ", "letterbox dlq list public/default")
    assert _counts(broker) == before == (3, 2)


def test_a_spark_redrive_of_a_topic_that_is_not_a_dead_letter_topic_is_refused(broker: BrokerProcess,
                                                                               topics: None) -> None:
    """`letterbox pipeline redrive` asks the same guard as `letterbox dlq redrive`, before any
    Spark session starts (the refusal comes back in well under Spark's start-up time)."""
    before = _counts(broker)
    _refused(run("pipeline", "redrive", SRC, "--admin-url", broker.admin_url, "--service-url", broker.url),
             f"{SRC} is not a dead letter topic", "cli-refusals-src-<subscription>-DLQ")
    assert _counts(broker) == before == (3, 2)


def test_a_purge_without_a_terminal_says_to_use_yes(broker: BrokerProcess, topics: None) -> None:
    _refused(dlq(broker, "purge", DLQ), "no terminal to confirm the purge on: add --yes")
    assert _counts(broker) == (3, 2)


def test_a_dlq_named_by_the_listing_is_accepted(broker: BrokerProcess, topics: None) -> None:
    custom = "persistent://public/default/cli-refusals-custom-dead-letters"
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    client.create_producer(custom).send(b"x", properties={"DEAD_LETTER_REASON": "expired"})
    client.close()
    assert ok_json(dlq(broker, "purge", custom, "--dry-run", "-o", "json")) == {"purged": 1, "dryRun": True}


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out: list[tuple[tuple[str, ...], click.Command]] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group imports its commands when named
        command = group.get_command(ctx, name)
        assert command is not None
        out.append(((*path, name), command))
        if isinstance(command, click.Group):
            out.extend(_commands(command, (*path, name)))
    return out


def test_every_url_option_reads_the_environment_with_the_same_default() -> None:
    expected = {"service_url": ("LETTERBOX_SERVICE_URL", DEFAULT_SERVICE_URL),
                "url": ("LETTERBOX_SERVICE_URL", DEFAULT_SERVICE_URL),
                "admin_url": ("LETTERBOX_ADMIN_URL", DEFAULT_ADMIN_URL)}
    seen = []
    for path, command in _commands(main):
        for param in command.params:
            opts = set(getattr(param, "opts", []))
            if not opts & {"--service-url", "--admin-url"}:
                continue
            seen.append(" ".join(path))
            envvar, default = expected[str(param.name)]
            assert (param.envvar, param.default) == (envvar, default), f"letterbox {' '.join(path)} {param.name}"
    assert {"pipeline run", "pipeline redrive", "pipeline dlq-report", "produce", "consume", "dlq", "admin",
            "perf produce", "perf consume"} <= set(seen)
    assert DEFAULT_SERVICE_URL.startswith("pulsar://127.0.0.1:") and DEFAULT_ADMIN_URL.startswith("http://127.0.0.1:")


def test_make_run_takes_the_ports() -> None:
    out = subprocess.run(["make", "-n", "-W", "pyproject.toml", "run", "PORT=7001", "ADMIN_PORT=7002"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "letterbox standalone --data-dir data --port 7001 --admin-port 7002" in out.stdout
