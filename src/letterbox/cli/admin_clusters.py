# `letterbox admin clusters list|get|create|update|delete` and `letterbox admin brokers
# list|version|healthcheck`: pulsar-admin's names and options (--url, --broker-url,
# --url-secure, --broker-url-secure) over /admin/v2/clusters[/{cluster}] and
# /admin/v2/brokers/... (super user routes).
from __future__ import annotations

import json
from typing import Any

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json
from letterbox.cli.params import q


@click.group()
def clusters() -> None:
    """List, show, register, update and remove clusters."""


@click.group()
def brokers() -> None:
    """The brokers of a cluster, their version and health."""


def _url_options(f: Any) -> Any:
    f = click.option("--broker-url-secure", "broker_url_tls", help="pulsar+ssl://host:port")(f)
    f = click.option("--url-secure", "url_tls", help="https://host:port of its admin service")(f)
    f = click.option("--broker-url", "broker_url", help="pulsar://host:port")(f)
    return click.option("--url", "url", help="http://host:port of its admin service")(f)


def _cluster_body(url: str | None, url_tls: str | None, broker_url: str | None,
                  broker_url_tls: str | None) -> dict[str, str]:
    body = {k: v for k, v in (("serviceUrl", url), ("serviceUrlTls", url_tls), ("brokerServiceUrl", broker_url),
                               ("brokerServiceUrlTls", broker_url_tls)) if v}
    if not body:
        raise click.UsageError("give at least one of --url, --broker-url, --url-secure, --broker-url-secure")
    return body


@admin_command(clusters, "list")
def clusters_list(a: AdminContext) -> None:
    """List clusters (this broker's first)."""
    a.names(a.client.get_json("/admin/v2/clusters"))


@admin_command(clusters, "get")
@click.argument("cluster")
def clusters_get(a: AdminContext, cluster: str) -> None:
    """Show a cluster's URLs."""
    data = a.client.get_json(f"/admin/v2/clusters/{q(cluster)}") or {}
    if a.json:
        echo_json(data)
        return
    for k, v in sorted(data.items()):
        click.echo(f"{k}: {v}")


@admin_command(clusters, "create")
@click.argument("cluster")
@_url_options
def clusters_create(a: AdminContext, cluster: str, url: str | None, url_tls: str | None, broker_url: str | None,
                    broker_url_tls: str | None) -> None:
    """Register a cluster (a name tenants may allow, with its URLs)."""
    a.client.request("PUT", f"/admin/v2/clusters/{q(cluster)}", _cluster_body(url, url_tls, broker_url, broker_url_tls))
    a.done(f"Created cluster {cluster}", cluster=cluster)


@admin_command(clusters, "update")
@click.argument("cluster")
@_url_options
def clusters_update(a: AdminContext, cluster: str, url: str | None, url_tls: str | None, broker_url: str | None,
                    broker_url_tls: str | None) -> None:
    """Replace a registered cluster's URLs."""
    a.client.request("POST", f"/admin/v2/clusters/{q(cluster)}", _cluster_body(url, url_tls, broker_url, broker_url_tls))
    a.done(f"Updated cluster {cluster}", cluster=cluster)


@admin_command(clusters, "delete")
@click.argument("cluster")
def clusters_delete(a: AdminContext, cluster: str) -> None:
    """Remove a registered cluster (not this broker's own)."""
    a.client.request("DELETE", f"/admin/v2/clusters/{q(cluster)}")
    a.done(f"Deleted cluster {cluster}", cluster=cluster)


@admin_command(brokers, "list")
@click.argument("cluster")
def brokers_list(a: AdminContext, cluster: str) -> None:
    """List the brokers of CLUSTER (host:port of their admin service)."""
    a.names(a.client.get_json(f"/admin/v2/brokers/{q(cluster)}"))


@admin_command(brokers, "version")
def brokers_version(a: AdminContext) -> None:
    """The broker's version."""
    body = a.client.request("GET", "/admin/v2/brokers/version").body.decode("utf-8", "replace").strip()
    try:  # plain text (letterbox and Apache Pulsar); a JSON string from older letterbox brokers
        version = str(json.loads(body))
    except ValueError:
        version = body
    a.report(version, {"version": version})


@admin_command(brokers, "healthcheck")
def brokers_healthcheck(a: AdminContext) -> None:
    """Check the broker is healthy (storage writable)."""
    text = a.client.request("GET", "/admin/v2/brokers/health").body.decode()
    a.report(text, {"result": text})
