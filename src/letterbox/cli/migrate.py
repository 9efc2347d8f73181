# `letterbox migrate`: a running letterbox broker's tenants, namespaces, topics with their
# retained messages and every subscription's position onto an Apache Pulsar cluster
# (letterbox.migrate does the work). The source is reached with the usual --service-url /
# --admin-url and --auth-token / --tls-trust-certs; the target with its own --target-* options.
# Safe to interrupt and run again; --dry-run prints the plan and writes nothing; --verify
# compares both sides afterwards (exit 1 when they differ).
from __future__ import annotations

import os
from typing import Any

import click

from letterbox.auth_flags import auth_options, current_auth
from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.cli.http import AdminClient
from letterbox.default_urls import (
    ADMIN_URL_ENV,
    DEFAULT_ADMIN_URL,
    DEFAULT_SERVICE_URL,
    SERVICE_URL_ENV,
)


def open_client(url: str, auth: AuthOptions) -> Any:
    """The official client on `url`, quiet; a URL it refuses is a usage error."""
    import pulsar

    # the client's own logger, errors only (a Python logger can abort the process at exit:
    # apache/pulsar-client-python#256)
    quiet = pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)
    try:
        return pulsar.Client(url, operation_timeout_seconds=30, logger=quiet, **auth.client_kwargs())
    except Exception as exc:  # the client refuses a malformed URL at once
        raise click.UsageError(f"cannot use {url!r} as a service URL: {exc}") from None


@click.command()
@click.option("--service-url", envvar=SERVICE_URL_ENV, default=DEFAULT_SERVICE_URL, show_default=True,
              help=f"The letterbox broker to copy from (env {SERVICE_URL_ENV}).")
@click.option("--admin-url", envvar=ADMIN_URL_ENV, default=DEFAULT_ADMIN_URL, show_default=True,
              help=f"Its admin API (env {ADMIN_URL_ENV}).")
@click.option("--target-url", required=True, help="The Apache Pulsar service URL to copy to.")
@click.option("--target-admin-url", required=True, help="The Apache Pulsar admin URL (web service).")
@click.option("--target-auth-token", envvar="LETTERBOX_TARGET_AUTH_TOKEN", help="A token for the target (env LETTERBOX_TARGET_AUTH_TOKEN).")
@click.option("--target-tls-trust-certs", type=click.Path(dir_okay=False, exists=True),
              help="CA certificate(s), PEM, of the target's TLS certificate.")
@click.option("--tenant", "tenants", multiple=True, help="Migrate only this tenant (repeatable).")
@click.option("--dry-run", is_flag=True, help="Print what would be migrated; write nothing.")
@click.option("--verify", "check", is_flag=True, help="After migrating, compare both sides.")
@auth_options
def migrate(service_url: str, admin_url: str, target_url: str, target_admin_url: str,
            target_auth_token: str | None, target_tls_trust_certs: str | None, tenants: tuple[str, ...],
            dry_run: bool, check: bool) -> None:
    """Copy this broker's topics, messages and subscription positions to Apache Pulsar."""
    from letterbox import migrate as m

    source_auth = current_auth()
    try:
        target_auth = AuthOptions.from_token(target_auth_token, target_tls_trust_certs or "")
    except AuthOptionsError as exc:
        raise click.UsageError(str(exc)) from None
    source_admin = AdminClient(admin_url, auth=source_auth)
    target_admin = AdminClient(target_admin_url, auth=target_auth)
    try:
        plan = m.read_plan(source_admin, list(tenants) or None)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if dry_run:
        for line in plan.describe():
            click.echo(line)
        return
    target_admin.get_json("/admin/v2/clusters")  # the target answers (and accepts the token) before any write
    source, target = open_client(service_url, source_auth), open_client(target_url, target_auth)
    try:
        def told(topic: str, sent: int, total: int) -> None:
            click.echo(f"\r{topic}: {sent}/{total}", nl=False, err=True)

        def note(line: str) -> None:
            click.echo(f"note: {line}", err=True)

        for copied in m.migrate(plan, source_admin, target_admin, source, target, told, note):
            click.echo(f"\r{copied.topic}: {copied.messages} messages ({copied.sent} sent by this run)", err=True)
        if check:
            problems = m.verify(plan, source_admin, target_admin, source, target)
            for p in problems:
                click.echo(f"differs: {p.what} {p.name}: source {p.source}, target {p.target}", err=True)
            if problems:
                raise SystemExit(1)
            click.echo(f"verified: {len(plan.topics)} topics, "
                       f"{sum(len(t.subscriptions) for t in plan.topics)} subscriptions identical")
    finally:
        source.close()
        target.close()
