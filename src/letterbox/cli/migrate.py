# `letterbox migrate`: a letterbox broker's tenants, namespaces, topics with their retained
# messages and every subscription's position onto an Apache Pulsar cluster (letterbox.migrate
# does the work). The source is a running broker reached with the usual --service-url /
# --admin-url and --auth-token / --tls-trust-certs, or a stopped broker's --data-dir (served by a
# private broker for the time of the migration: migrate.stopped_source); the target is reached
# with its own --target-* options. Both ends are checked before the first write (copy_checks).
# Safe to interrupt and run again; --dry-run prints the plan and writes nothing; --verify
# compares both sides afterwards (exit 1 when they differ). A broker that goes away part-way
# (the target not storing a send within --target-timeout, a client or admin call failing) ends the
# run with one line naming the topic it stopped at, exit status 1: the rerun resumes there.
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from letterbox.auth_flags import auth_options, current_auth
from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.cli.copy_checks import End, check_admin, check_broker, missing_tenants, note, refuse
from letterbox.cli.http import AdminApiError, AdminClient, AdminUnreachable
from letterbox.default_urls import (
    ADMIN_URL_ENV,
    DEFAULT_ADMIN_URL,
    DEFAULT_SERVICE_URL,
    SERVICE_URL_ENV,
)


def open_client(url: str, auth: AuthOptions, timeout_s: int = 30) -> Any:
    """The official client on `url`, quiet, its operations bounded by `timeout_s`; a URL it
    refuses is a usage error."""
    import pulsar

    # the client's own logger, errors only (a Python logger can abort the process at exit:
    # apache/pulsar-client-python#256)
    quiet = pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)
    try:
        return pulsar.Client(url, operation_timeout_seconds=timeout_s, logger=quiet, **auth.client_kwargs())
    except Exception as exc:  # the client refuses a malformed URL at once
        raise click.UsageError(f"cannot use {url!r} as a service URL: {exc}") from None


SOURCE = End("the source letterbox", "--service-url", "--admin-url", "--auth-token")
TARGET = End("the target Apache Pulsar", "--target-url", "--target-admin-url", "--target-auth-token")


def _check_data_dir(ctx: click.Context, data_dir: Path) -> None:
    """--data-dir alone names the source, and is a letterbox data dir no running broker holds."""
    given = [f"--{n.replace('_', '-')}" for n in ("service_url", "admin_url", "auth_token", "auth_token_file")
             if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE]
    if given:
        refuse(f"--data-dir is the source: give it without {' and '.join(given)}")
    from letterbox.cli.verify import held_data_dir

    held_data_dir(data_dir).release()  # the private broker takes the lock itself


@contextmanager
def _source(data_dir: Path | None, service_url: str, admin_url: str) -> Iterator[tuple[str, str]]:
    """The source's service and admin URLs: the given ones, or a private broker's on `data_dir`."""
    if data_dir is None:
        yield service_url, admin_url
        return
    from letterbox.migrate.stopped_source import SourceDidNotStart, serve_data_dir

    try:
        with serve_data_dir(data_dir) as broker:
            yield broker.service_url, broker.admin_url
    except SourceDidNotStart as exc:
        refuse(str(exc))


@click.command()
@click.option("--service-url", envvar=SERVICE_URL_ENV, default=DEFAULT_SERVICE_URL, show_default=True,
              help=f"The letterbox broker to copy from (env {SERVICE_URL_ENV}).")
@click.option("--admin-url", envvar=ADMIN_URL_ENV, default=DEFAULT_ADMIN_URL, show_default=True,
              help=f"Its admin API (env {ADMIN_URL_ENV}).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Copy from a stopped broker's data directory instead (a private broker serves it on "
              "127.0.0.1 during the migration).")
@click.option("--target-url", required=True, help="The Apache Pulsar service URL to copy to.")
@click.option("--target-admin-url", required=True, help="The Apache Pulsar admin URL (web service).")
@click.option("--target-auth-token", envvar="LETTERBOX_TARGET_AUTH_TOKEN", help="A token for the target (env LETTERBOX_TARGET_AUTH_TOKEN).")
@click.option("--target-tls-trust-certs", type=click.Path(dir_okay=False, exists=True),
              help="CA certificate(s), PEM, of the target's TLS certificate.")
@click.option("--target-timeout", type=click.IntRange(1, 3600), default=30, show_default=True,
              help="Seconds the target may leave a request unanswered before migrate stops (rerun to resume).")
@click.option("--tenant", "tenants", multiple=True, help="Migrate only this tenant (repeatable).")
@click.option("--dry-run", is_flag=True, help="Check both ends and print what would be migrated; write nothing.")
@click.option("--verify", "check", is_flag=True, help="After migrating, compare both sides.")
@auth_options
@click.pass_context
def migrate(ctx: click.Context, service_url: str, admin_url: str, data_dir: Path | None, target_url: str,
            target_admin_url: str, target_auth_token: str | None, target_tls_trust_certs: str | None,
            target_timeout: int, tenants: tuple[str, ...], dry_run: bool, check: bool) -> None:
    """Copy this broker's topics, messages and subscription positions to Apache Pulsar."""
    from letterbox import migrate as m

    try:
        target_auth = AuthOptions.from_token(target_auth_token, target_tls_trust_certs or "")
    except AuthOptionsError as exc:
        raise click.UsageError(str(exc)) from None
    if data_dir is not None:
        _check_data_dir(ctx, data_dir)
    target_admin = AdminClient(target_admin_url, auth=target_auth)
    # the target before the source: a bad target is refused before a private broker starts on --data-dir
    answer = check_broker(TARGET, target_url, target_auth, pulsar=True)
    check_admin(TARGET, target_admin, pulsar=not answer.is_letterbox)
    with _source(data_dir, service_url, admin_url) as (src_url, src_admin_url):
        source_auth = current_auth() if data_dir is None else AuthOptions()
        source_admin = AdminClient(src_admin_url, auth=source_auth)
        check_admin(SOURCE, source_admin, pulsar=False)
        check_broker(SOURCE, src_url, source_auth, pulsar=False)
        try:
            plan = m.read_plan(source_admin, list(tenants) or None)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        for tenant in missing_tenants(TARGET, target_admin, plan.tenants):
            note(f"the target has no tenant {tenant}: migrate creates it, allowed on the target's clusters")
        if dry_run:
            for line in plan.describe():
                click.echo(line)
            return
        _run(plan, source_admin, target_admin, open_client(src_url, source_auth),
             open_client(target_url, target_auth, target_timeout), check, target_timeout)


class _Progress:
    """Where a migration run is: the step it is on (named in the message when it stops) and the
    progress line on stderr for the topic being copied."""

    def __init__(self) -> None:
        self.at = "the target's tenants and namespaces"

    def topic(self, topic: str, sent: int, total: int) -> None:
        self.at = topic
        click.echo(f"\r{topic}: {sent}/{total}", nl=False, err=True)


def _run(plan: Any, source_admin: AdminClient, target_admin: AdminClient, source: Any, target: Any,
         check: bool, timeout_s: int) -> None:
    import pulsar

    from letterbox import migrate as m

    progress = _Progress()
    problems: list[Any] = []
    try:
        try:
            for copied in m.migrate(plan, source_admin, target_admin, source, target, progress.topic, note,
                                    timeout_s * 1000):
                click.echo(f"\r{copied.topic}: {copied.messages} messages ({copied.sent} sent by this run)", err=True)
            if check:
                progress.at = "the verification"
                problems = m.verify(plan, source_admin, target_admin, source, target)
        except (m.CopyInterrupted, pulsar.PulsarException, AdminUnreachable, AdminApiError) as exc:
            if isinstance(exc, AdminApiError) and exc.status < 500:
                raise
            detail = (exc.format_message() if isinstance(exc, click.ClickException) else str(exc)) or type(exc).__name__
            click.echo(err=True)  # after the progress line
            raise click.ClickException(f"migrate stopped at {progress.at}: {detail}; what was copied stays: run the "
                                       "same command again once both brokers answer, it resumes there") from None
        if check:
            for p in problems:
                click.echo(f"differs: {p.what} {p.name}: source {p.source}, target {p.target}", err=True)
            if problems:
                raise SystemExit(1)
            click.echo(f"verified: {len(plan.topics)} topics, "
                       f"{sum(len(t.subscriptions) for t in plan.topics)} subscriptions identical")
    finally:
        source.close()
        target.close()
