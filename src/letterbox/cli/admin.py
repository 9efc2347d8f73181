# `letterbox admin ...`: a pulsar-admin-style command line for the admin REST
# API (docs/admin.md, docs/cli.md). Each verb is one HTTP call (peek-messages:
# one per message) to Pulsar's admin v2 paths, so the commands work against a
# real Pulsar broker too. This module owns the `admin` group and the tenants
# and namespaces verbs; topic and subscription verbs are in cli_admin_topics.
# Output is human by default; `--output json` prints what the API returned
# (or {"result": "ok", ...} for calls that return nothing).
from __future__ import annotations

import click

from letterbox.auth_flags import current_auth
from letterbox.cli import (
    admin_attempts,  # noqa: F401  (registers `topics attempts`)
    admin_compaction,  # registers `topics compact` / `compaction-status`
    admin_namespace_limits,
    admin_permissions,
    admin_poison,  # noqa: F401  (registers `topics poison-suspects`)
    admin_schemas,
    admin_topic_ops,  # noqa: F401  (registers `topics unload|terminate|trim-topic|...`)
    admin_topic_policies,  # noqa: F401  (registers `topics set-max-producers|set-backlog-quota|...`)
)
from letterbox.cli.admin_circuit import circuit
from letterbox.cli.admin_clock import clock
from letterbox.cli.admin_clusters import brokers, clusters
from letterbox.cli.admin_topics import topics
from letterbox.cli.http import (
    AdminClient,
    AdminContext,
    admin_command,
    admin_group_options,
)
from letterbox.cli.output import echo_json, fmt, key_values
from letterbox.cli.params import (
    NAMESPACE,
    namespace_path,
    parse_duration_seconds,
    parse_size_mb,
    q,
)


@click.group()
@admin_group_options
@click.pass_context
def admin(ctx: click.Context, admin_url: str, output: str) -> None:
    """Administer tenants, namespaces, topics and subscriptions (like pulsar-admin).

    Talks to the broker's admin REST API (`letterbox standalone --admin-port`).
    """
    ctx.obj = AdminContext(AdminClient(admin_url, auth=current_auth()), output.lower())


admin.add_command(topics)
admin.add_command(clusters)
admin.add_command(brokers)
admin.add_command(clock)
admin.add_command(circuit)


# --- tenants -----------------------------------------------------------------------
@admin.group()
def tenants() -> None:
    """List, show, create and delete tenants."""


@admin_command(tenants, "list")
def tenants_list(a: AdminContext) -> None:
    """List tenants."""
    a.names(a.client.get_json("/admin/v2/tenants"))


@admin_command(tenants, "get")
@click.argument("tenant")
def tenants_get(a: AdminContext, tenant: str) -> None:
    """Show a tenant's admin roles and allowed clusters."""
    info = a.client.get_json(f"/admin/v2/tenants/{q(tenant)}")
    if a.json:
        echo_json(info)
        return
    for k, v in (info or {}).items():
        click.echo(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else fmt(v)}")


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


@admin_command(tenants, "create")
@click.argument("tenant")
@click.option("--admin-roles", "-r", help="Comma-separated admin roles.")
@click.option("--allowed-clusters", "-c", help="Comma-separated clusters [the broker's cluster].")
def tenants_create(a: AdminContext, tenant: str, admin_roles: str | None, allowed_clusters: str | None) -> None:
    """Create a tenant."""
    body: dict[str, list[str]] = {"adminRoles": _csv(admin_roles)}
    if allowed_clusters:
        body["allowedClusters"] = _csv(allowed_clusters)
    a.client.request("PUT", f"/admin/v2/tenants/{q(tenant)}", body)
    a.done(f"Created tenant {tenant}", tenant=tenant)


@admin_command(tenants, "delete")
@click.argument("tenant")
def tenants_delete(a: AdminContext, tenant: str) -> None:
    """Delete a tenant (it must have no namespaces)."""
    a.client.request("DELETE", f"/admin/v2/tenants/{q(tenant)}")
    a.done(f"Deleted tenant {tenant}", tenant=tenant)


# --- namespaces ---------------------------------------------------------------------
@admin.group()
def namespaces() -> None:
    """List, create and delete namespaces; show and set their policies.

    NAMESPACE is TENANT/NAMESPACE, e.g. public/default.
    """


@admin_command(namespaces, "list")
@click.argument("tenant")
def namespaces_list(a: AdminContext, tenant: str) -> None:
    """List the namespaces of TENANT."""
    a.names(a.client.get_json(f"/admin/v2/namespaces/{q(tenant)}"))


@admin_command(namespaces, "create", "namespace", NAMESPACE)
def namespaces_create(a: AdminContext, namespace: str) -> None:
    """Create NAMESPACE."""
    a.client.request("PUT", namespace_path(namespace))
    a.done(f"Created namespace {namespace}", namespace=namespace)


@admin_command(namespaces, "delete", "namespace", NAMESPACE)
def namespaces_delete(a: AdminContext, namespace: str) -> None:
    """Delete NAMESPACE (it must have no topics)."""
    a.client.request("DELETE", namespace_path(namespace))
    a.done(f"Deleted namespace {namespace}", namespace=namespace)


@admin_command(namespaces, "policies", "namespace", NAMESPACE)
def namespaces_policies(a: AdminContext, namespace: str) -> None:
    """Show the policies of NAMESPACE (deduplication, retention, TTL, ...)."""
    policies = a.client.get_json(namespace_path(namespace))
    if a.json:
        echo_json(policies)
        return
    click.echo(f"namespace: {namespace}")
    key_values(dict(sorted((policies or {}).items())), nested=True)


@admin_command(namespaces, "set-deduplication", "namespace", NAMESPACE)
@click.option("--enable/--disable", "-e/-d", "enable", default=None,
              help="Turn producer message deduplication on or off.")
def namespaces_set_dedup(a: AdminContext, namespace: str, enable: bool | None) -> None:
    """Enable or disable message deduplication for NAMESPACE."""
    if enable is None:
        raise click.UsageError("say --enable or --disable")
    a.client.request("POST", namespace_path(namespace) + "/deduplication", enable)
    state = "enabled" if enable else "disabled"
    a.done(f"Deduplication {state} on {namespace}",
           namespace=namespace, deduplicationEnabled=enable)


@admin_command(namespaces, "set-retention", "namespace", NAMESPACE)
@click.option("--time", "-t", "retention_time", required=True,
              help="How long acknowledged messages are kept: 100m, 3h, 2d, 5w (seconds if no unit); "
                   "0 none, -1 forever.")
@click.option("--size", "-s", "retention_size", required=True,
              help="How much is kept per topic: 10M, 16G, 3T (bytes if no unit); -1 no limit.")
def namespaces_set_retention(a: AdminContext, namespace: str, retention_time: str,
                             retention_size: str) -> None:
    """Set the retention of acknowledged messages for NAMESPACE."""
    seconds = parse_duration_seconds(retention_time, "'-t' / '--time'")
    size_mb = parse_size_mb(retention_size, "'-s' / '--size'")
    if seconds < -1 or size_mb < -1:
        raise click.BadParameter("use -1 for unlimited; other negative values are not allowed")
    minutes = -1 if seconds == -1 else seconds // 60
    body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
    a.client.request("POST", namespace_path(namespace) + "/retention", body)
    a.done(f"Retention of {namespace} set to {minutes} minutes, {size_mb} MB",
           namespace=namespace, **body)


@admin_command(namespaces, "set-message-ttl", "namespace", NAMESPACE)
@click.option("--ttl", "-t", "ttl", required=True,
              help="Message time to live: seconds, or 10m, 1h, 3d; 0 turns TTL off.")
def namespaces_set_ttl(a: AdminContext, namespace: str, ttl: str) -> None:
    """Set the message TTL of NAMESPACE (unacknowledged messages older than it expire)."""
    seconds = parse_duration_seconds(ttl, "'-t' / '--ttl'")
    if seconds < 0:
        raise click.BadParameter(f"{ttl!r}: the TTL cannot be negative", param_hint="'-t' / '--ttl'")
    a.client.request("POST", namespace_path(namespace) + "/messageTTL", seconds)
    a.done(f"Message TTL of {namespace} set to {seconds} seconds",
           namespace=namespace, messageTTL=seconds)


# --- letterbox extensions: dead-letter and backoff policies of a namespace ----------------
@admin_command(namespaces, "set-dead-letter-policy", "namespace", NAMESPACE)
@click.option("--max-redeliver-count", "-c", type=click.IntRange(min=0), required=True,
              help="Redeliveries allowed before the broker dead-letters a message.")
@click.option("--dead-letter-topic", "-t", help="Dead letter topic [<topic>-<subscription>-DLQ].")
@click.option("--initial-subscription", "-i", help="Subscription created on the dead letter topic.")
@click.option("--on-key-failure", type=click.Choice(["continue", "park"]),
              help="park: the ordered quarantine on Exclusive, Failover and Key_Shared subscriptions "
                   "(a dead-lettered message's key is parked behind it) [continue].")
def namespaces_set_dlq(a: AdminContext, namespace: str, max_redeliver_count: int,
                       dead_letter_topic: str | None, initial_subscription: str | None,
                       on_key_failure: str | None) -> None:
    """Dead-letter policy for every subscription in NAMESPACE (letterbox extension)."""
    body: dict[str, object] = {"maxRedeliverCount": max_redeliver_count}
    if dead_letter_topic:
        body["deadLetterTopic"] = dead_letter_topic
    if initial_subscription:
        body["initialSubscriptionName"] = initial_subscription
    if on_key_failure:
        body["onKeyFailure"] = on_key_failure
    a.client.request("POST", namespace_path(namespace) + "/letterbox/deadLetterPolicy", body)
    a.done(f"Dead-letter policy of {namespace} set: after {max_redeliver_count} redeliveries",
           namespace=namespace, deadLetterPolicy=body)


@admin_command(namespaces, "set-redelivery-backoff", "namespace", NAMESPACE)
@click.option("--min-delay-ms", type=click.IntRange(min=0), required=True, help="First redelivery delay.")
@click.option("--max-delay-ms", type=click.IntRange(min=0), help="Cap on the delay [60000].")
@click.option("--multiplier", type=float, help="Growth per redelivery [2].")
@click.option("--jitter", type=click.Choice(["none", "full", "equal"]), help="Randomise each delay [none].")
def namespaces_set_backoff(a: AdminContext, namespace: str, min_delay_ms: int,
                           max_delay_ms: int | None, multiplier: float | None, jitter: str | None) -> None:
    """Redelivery backoff for every subscription in NAMESPACE (letterbox extension)."""
    body: dict[str, object] = {"minDelayMs": min_delay_ms}
    if jitter is not None:
        body["jitter"] = jitter
    if max_delay_ms is not None:
        body["maxDelayMs"] = max_delay_ms
    if multiplier is not None:
        body["multiplier"] = multiplier
    a.client.request("POST", namespace_path(namespace) + "/letterbox/redeliveryBackoff", body)
    a.done(f"Redelivery backoff of {namespace} set: from {min_delay_ms} ms",
           namespace=namespace, redeliveryBackoff=body)


@admin_command(namespaces, "set-circuit-breaker", "namespace", NAMESPACE)
@click.option("--failure-percent", type=click.IntRange(1, 100), help="Failed share of deliveries that trips it [50].")
@click.option("--min-deliveries", type=click.IntRange(min=1), help="Deliveries in the window before it may trip [20].")
@click.option("--window-ms", type=click.IntRange(min=1), help="The sliding window [30000].")
@click.option("--min-distinct", type=click.IntRange(min=1), help="Distinct failing messages needed [5].")
@click.option("--cooldown-ms", type=click.IntRange(min=1), help="Open time before a probe [30000].")
def namespaces_set_circuit(a: AdminContext, namespace: str, **fields: int | None) -> None:
    """Outage detection (a circuit breaker) for every subscription in NAMESPACE (letterbox extension)."""
    names = {"failure_percent": "failurePercent", "min_deliveries": "minDeliveries", "window_ms": "windowMs",
             "min_distinct": "minDistinct", "cooldown_ms": "cooldownMs"}
    body = {names[k]: v for k, v in fields.items() if v is not None}
    a.client.request("POST", namespace_path(namespace) + "/letterbox/circuitBreaker", body)
    a.done(f"Circuit breaker of {namespace} set", namespace=namespace, circuitBreaker=body)


_REMOVABLE = {
    "deduplication": "/deduplication",
    "retention": "/retention",
    "message-ttl": "/messageTTL",
    "dead-letter-policy": "/letterbox/deadLetterPolicy",
    "redelivery-backoff": "/letterbox/redeliveryBackoff",
    "circuit-breaker": "/letterbox/circuitBreaker",
}


@admin_command(namespaces, "remove-policy", "namespace", NAMESPACE)
@click.argument("policy", type=click.Choice(list(_REMOVABLE)))
def namespaces_remove_policy(a: AdminContext, namespace: str, policy: str) -> None:
    """Remove one policy of NAMESPACE, back to the broker's default."""
    a.client.request("DELETE", namespace_path(namespace) + _REMOVABLE[policy])
    a.done(f"Removed {policy} from {namespace}", namespace=namespace, policy=policy)


admin_permissions.register(namespaces)
admin_namespace_limits.register(namespaces)
admin_compaction.register(namespaces)
admin_schemas.register(admin, namespaces)  # `admin schemas ...` and the schema compatibility strategy
