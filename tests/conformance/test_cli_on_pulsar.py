"""Every `letterbox admin` and `letterbox dlq` command against the reference Apache Pulsar: each
either works as it does on letterbox (exit 0) or says in one line, without a traceback, that it
needs letterbox and what to use on Pulsar instead. SCRIPT runs every leaf command once, in an
order that creates what later commands need and removes it at the end; a command missing from
SCRIPT fails the test, so a new command must say how it behaves on Pulsar. docs/migrate.md's
table is this test's expectations."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from letterbox.cli import main
from tests.conformance.targets import Target, client

pytestmark = pytest.mark.timeout(600)

OK, NEEDS = "ok", "needs letterbox"
ID = uuid.uuid4().hex[:8]
TENANT = f"cli-{ID}"
NS = f"{TENANT}/ns"
T = f"persistent://{NS}/t"
P = f"persistent://{NS}/p"
D = f"persistent://{NS}/t-s-DLQ"

# (argv after `letterbox`, expected outcome on Apache Pulsar); {msg} is the id of a stored message
SCRIPT: list[tuple[str, str]] = [
    (f"admin tenants create {TENANT} --allowed-clusters standalone", OK),
    ("admin tenants list", OK),
    (f"admin tenants get {TENANT}", OK),
    (f"admin namespaces create {NS}", OK),
    (f"admin namespaces list {TENANT}", OK),
    (f"admin namespaces policies {NS}", OK),
    (f"admin namespaces set-deduplication {NS} --enable", OK),
    (f"admin namespaces set-retention {NS} --time 1h --size 100M", OK),
    (f"admin namespaces set-message-ttl {NS} --ttl 3600", OK),
    (f"admin namespaces set-dead-letter-policy {NS} --max-redeliver-count 3", NEEDS),
    (f"admin namespaces set-redelivery-backoff {NS} --min-delay-ms 1000", NEEDS),
    (f"admin namespaces set-circuit-breaker {NS} --cooldown-ms 1000", NEEDS),
    (f"admin namespaces remove-policy {NS} message-ttl", OK),
    (f"admin namespaces grant-permission {NS} --role app --actions consume", OK),
    (f"admin namespaces permissions {NS}", OK),
    (f"admin namespaces revoke-permission {NS} --role app", OK),
    (f"admin namespaces set-max-producers-per-topic {NS} --max-producers-per-topic 10", OK),
    (f"admin namespaces get-max-producers-per-topic {NS}", OK),
    (f"admin namespaces remove-max-producers-per-topic {NS}", OK),
    (f"admin namespaces set-max-consumers-per-topic {NS} --max-consumers-per-topic 10", OK),
    (f"admin namespaces get-max-consumers-per-topic {NS}", OK),
    (f"admin namespaces remove-max-consumers-per-topic {NS}", OK),
    (f"admin namespaces set-max-unacked-messages-per-consumer {NS} --max-unacked-messages-per-consumer 100", OK),
    (f"admin namespaces get-max-unacked-messages-per-consumer {NS}", OK),
    (f"admin namespaces remove-max-unacked-messages-per-consumer {NS}", OK),
    (f"admin namespaces set-max-unacked-messages-per-subscription {NS} --max-unacked-messages-per-subscription 100",
     OK),
    (f"admin namespaces get-max-unacked-messages-per-subscription {NS}", OK),
    (f"admin namespaces remove-max-unacked-messages-per-subscription {NS}", OK),
    (f"admin namespaces set-dispatch-rate {NS} --msg-dispatch-rate 1000", OK),
    (f"admin namespaces get-dispatch-rate {NS}", OK),
    (f"admin namespaces remove-dispatch-rate {NS}", OK),
    (f"admin namespaces set-subscription-dispatch-rate {NS} --msg-dispatch-rate 1000", OK),
    (f"admin namespaces get-subscription-dispatch-rate {NS}", OK),
    (f"admin namespaces remove-subscription-dispatch-rate {NS}", OK),
    (f"admin namespaces set-inactive-topic-policies {NS} -e --max-inactive-duration 1h --delete-mode delete_when_no_subscriptions",
     OK),
    (f"admin namespaces get-inactive-topic-policies {NS}", OK),
    (f"admin namespaces remove-inactive-topic-policies {NS}", OK),
    (f"admin namespaces set-backlog-quota {NS} --limit 10M --policy producer_request_hold", OK),
    (f"admin namespaces get-backlog-quotas {NS}", OK),
    (f"admin namespaces remove-backlog-quota {NS}", OK),
    (f"admin namespaces set-delayed-delivery {NS} --enable", OK),
    (f"admin namespaces get-delayed-delivery {NS}", OK),
    (f"admin namespaces remove-delayed-delivery {NS}", OK),
    (f"admin namespaces set-auto-topic-creation {NS} --enable", OK),
    (f"admin namespaces get-auto-topic-creation {NS}", OK),
    (f"admin namespaces remove-auto-topic-creation {NS}", OK),
    (f"admin namespaces set-compaction-threshold {NS} --threshold 10M", OK),
    (f"admin namespaces get-compaction-threshold {NS}", OK),
    (f"admin namespaces remove-compaction-threshold {NS}", OK),
    (f"admin namespaces set-schema-compatibility-strategy {NS} --compatibility FORWARD", OK),
    (f"admin namespaces get-schema-compatibility-strategy {NS}", OK),
    (f"admin topics create {T}", OK),
    (f"admin topics create-partitioned-topic {P} --partitions 2", OK),
    (f"admin topics list {NS}", OK),
    (f"admin topics create-subscription {T} --subscription s", OK),
    (f"admin topics subscriptions {T}", OK),
    ("@produce", OK),
    (f"admin topics stats {T}", OK),
    (f"admin topics partitioned-stats {P}", OK),
    (f"admin topics internal-stats {T}", OK),
    (f"admin topics partitioned-stats-internal {P}", OK),
    (f"admin topics peek-messages {T} --subscription s", OK),
    (f"admin topics get-message-by-id {T} --ledgerId {{ledger}} --entryId {{entry}}", OK),
    (f"admin topics examine-message {T}", OK),
    (f"admin topics last-message-id {T}", OK),
    (f"admin topics attempts {T} s {{msg}}", NEEDS),
    (f"admin topics poison-suspects {T} --subscription s", NEEDS),
    (f"admin circuit get {T} s", NEEDS),
    (f"admin circuit open {T} s", NEEDS),
    (f"admin circuit close {T} s", NEEDS),
    (f"admin topics skip {T} --subscription s --count 1", OK),
    (f"admin topics reset-cursor {T} --subscription s --time 1h", OK),
    (f"admin topics expire-messages {T} --subscription s --expireTime 1", OK),
    (f"admin topics clear-backlog {T} --subscription s", OK),
    (f"admin topics compact {T}", OK),
    (f"admin topics compaction-status {T}", OK),
    (f"admin topics unload {T}", OK),
    (f"admin topics trim-topic {T}", OK),
    (f"admin topics update-partitioned-topic {P} --partitions 3", OK),
    (f"admin topics set-max-producers {T} --max-producers 5", OK),
    (f"admin topics get-max-producers {T}", OK),
    (f"admin topics remove-max-producers {T}", OK),
    (f"admin topics set-max-consumers {T} --max-consumers 5", OK),
    (f"admin topics get-max-consumers {T}", OK),
    (f"admin topics remove-max-consumers {T}", OK),
    (f"admin topics set-max-unacked-messages-on-consumer {T} --max-unacked 100", OK),
    (f"admin topics get-max-unacked-messages-on-consumer {T}", OK),
    (f"admin topics remove-max-unacked-messages-on-consumer {T}", OK),
    (f"admin topics set-max-unacked-messages-on-subscription {T} --max-unacked 100", OK),
    (f"admin topics get-max-unacked-messages-on-subscription {T}", OK),
    (f"admin topics remove-max-unacked-messages-on-subscription {T}", OK),
    (f"admin topics set-backlog-quota {T} --limit 10M --policy producer_request_hold", OK),
    (f"admin topics get-backlog-quotas {T}", OK),
    (f"admin topics remove-backlog-quota {T}", OK),
    (f"admin topics set-delayed-delivery {T} --enable", OK),
    (f"admin topics get-delayed-delivery {T}", OK),
    (f"admin topics remove-delayed-delivery {T}", OK),
    (f"admin topics set-dispatch-rate {T} --msg-dispatch-rate 1000", OK),
    (f"admin topics get-dispatch-rate {T}", OK),
    (f"admin topics remove-dispatch-rate {T}", OK),
    (f"admin topics set-subscription-dispatch-rate {T} --msg-dispatch-rate 1000", OK),
    (f"admin topics get-subscription-dispatch-rate {T}", OK),
    (f"admin topics remove-subscription-dispatch-rate {T}", OK),
    (f"admin topics set-inactive-topic-policies {T} -e --max-inactive-duration 1h --delete-mode delete_when_no_subscriptions",
     OK),
    (f"admin topics get-inactive-topic-policies {T}", OK),
    (f"admin topics remove-inactive-topic-policies {T}", OK),
    (f"admin schemas upload {T} --filename {{schema}}", OK),
    (f"admin schemas get {T}", OK),
    (f"admin schemas list {T}", OK),
    (f"admin schemas delete {T}", OK),
    (f"dlq list {NS}", NEEDS),
    (f"dlq peek {D}", NEEDS),
    (f"dlq redrive {D}", NEEDS),
    (f"dlq redrive-status {D} 1", NEEDS),
    (f"dlq redrive-cancel {D}", NEEDS),
    (f"dlq purge {D} --yes", NEEDS),
    (f"dlq groups {D}", NEEDS),
    (f"dlq export {D}", NEEDS),
    (f"dlq replay {D} --message-id {{msg}} --set-property fixed=1", NEEDS),
    ("admin clusters list", OK),
    ("admin clusters get standalone", OK),
    (f"admin clusters create c{ID} --url http://127.0.0.1:1 --broker-url pulsar://127.0.0.1:1", OK),
    (f"admin clusters update c{ID} --url http://127.0.0.1:2", OK),
    (f"admin clusters delete c{ID}", OK),
    ("admin brokers list standalone", OK),
    ("admin brokers version", OK),
    ("admin brokers healthcheck", OK),
    ("admin clock get", NEEDS),
    ("admin clock advance 1s", NEEDS),
    (f"admin topics terminate {T}", OK),
    (f"admin topics terminate-partitioned-topic {P}", OK),
    (f"admin topics unsubscribe {T} --subscription s", OK),
    (f"admin topics delete {T}", OK),
    (f"admin topics delete-partitioned-topic {P}", OK),
    (f"admin namespaces delete {NS}", OK),
    (f"admin tenants delete {TENANT}", OK),
]


def _leaves(cmd: click.Command, path: list[str]) -> Iterator[str]:
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _leaves(sub, [*path, name])
    else:
        yield " ".join(path)


def _command_of(argv: str) -> str:
    words = argv.split()
    return " ".join(words[:3] if words[0] == "admin" else words[:2])


def test_the_script_names_every_admin_and_dlq_command() -> None:
    every = {leaf for top in ("admin", "dlq") for leaf in _leaves(main.get_command(click.Context(main), top), [top])}
    scripted = {_command_of(argv) for argv, _ in SCRIPT if not argv.startswith("@")}
    assert every - scripted == set(), "commands with no expectation on Apache Pulsar"


def _outcome(result: object) -> tuple[str, str]:
    """What one invocation came to: ok, needs letterbox, or what went wrong with it."""
    code, output, exc = result.exit_code, result.output, result.exception  # type: ignore[attr-defined]
    if "Traceback" in output or not (exc is None or isinstance(exc, SystemExit)):
        return f"escaped {exc!r}", output
    if code == 0:
        return OK, output
    if "Usage:" in output:
        return "usage error (the script's own mistake)", output
    lines = [line for line in output.splitlines() if line.strip()]
    if len(lines) != 1:
        return "not one line", output
    if "needs a letterbox broker" in output:
        return NEEDS, output
    return f"error: {lines[0]}", output


def test_every_command_works_or_says_it_needs_letterbox(reference: Target, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "STRING", "schema": "", "properties": {}}')
    values = {"schema": str(schema), "msg": "", "ledger": "", "entry": ""}
    runner = CliRunner()
    env = {"LETTERBOX_ADMIN_URL": reference.admin_url, "LETTERBOX_SERVICE_URL": reference.service_url}
    wrong: dict[str, str] = {}
    for argv, expected in SCRIPT:
        if argv == "@produce":
            with client(reference) as c:
                mid = c.create_producer(T).send(b"on pulsar", properties={"k": "v"})
            values.update(msg=f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}",
                          ledger=str(mid.ledger_id()), entry=str(mid.entry_id()))
            continue
        result = runner.invoke(main, argv.format(**values).split(), env=env, catch_exceptions=True)
        got, output = _outcome(result)
        if got != expected:
            wrong[argv] = f"expected {expected}, got {got}: {output.strip()[:300]}"
    assert wrong == {}, "\n".join(f"{a}: {o}" for a, o in wrong.items())
