# `letterbox admin namespaces set-backlog-quota | get-backlog-quotas | remove-backlog-quota |
# set/get/remove-max-producers-per-topic | ...-max-consumers-per-topic |
# ...-max-unacked-messages-per-consumer | ...-max-unacked-messages-per-subscription |
# set/get/remove-delayed-delivery | set/get/remove-auto-topic-creation |
# set/get/remove-dispatch-rate | ...-subscription-dispatch-rate | ...-inactive-topic-policies`: pulsar-admin's
# names and options over .../namespaces/{tenant}/{ns}/<policy> (admin/routes_namespace_limits.py).
from __future__ import annotations

from typing import Any

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.params import NAMESPACE, namespace_path, parse_duration_seconds, parse_size_bytes

QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
_COUNTS = (("max-producers-per-topic", "maxProducersPerTopic", "producers on one topic"),
           ("max-consumers-per-topic", "maxConsumersPerTopic", "consumers on one topic"),
           ("max-unacked-messages-per-consumer", "maxUnackedMessagesPerConsumer",
            "unacknowledged messages per consumer (Shared/Key_Shared)"),
           ("max-unacked-messages-per-subscription", "maxUnackedMessagesPerSubscription",
            "unacknowledged messages per subscription (Shared/Key_Shared)"))


def register(namespaces: click.Group) -> None:
    for verb, path, what in _COUNTS:
        _count_verbs(namespaces, verb, path, what)
    for verb, path in (("dispatch-rate", "dispatchRate"), ("subscription-dispatch-rate", "subscriptionDispatchRate"),
                       ("inactive-topic-policies", "inactiveTopicPolicies")):
        _get_remove_verbs(namespaces, verb, path)
    for cmd in (set_dispatch_rate, set_subscription_dispatch_rate, set_inactive_topic_policies,
                set_backlog_quota, get_backlog_quotas, remove_backlog_quota, set_delayed_delivery,
                get_delayed_delivery, remove_delayed_delivery, set_auto_topic_creation,
                get_auto_topic_creation, remove_auto_topic_creation):
        namespaces.add_command(cmd)


def _count_verbs(group: click.Group, verb: str, path: str, what: str) -> None:
    @admin_command(group, f"set-{verb}", "namespace", NAMESPACE)
    @click.option(f"--{verb}", "value", type=click.IntRange(min=0), required=True,
                  help=f"Most {what}; 0 for no limit.")
    def set_(a: AdminContext, namespace: str, value: int) -> None:
        a.client.request("POST", namespace_path(namespace) + "/" + path, value)
        a.done(f"Set {verb} of {namespace} to {value}", namespace=namespace, **{path: value})

    set_.__doc__ = f"Limit the {what} in NAMESPACE."

    @admin_command(group, f"get-{verb}", "namespace", NAMESPACE)
    def get_(a: AdminContext, namespace: str) -> None:
        value = a.client.request("GET", namespace_path(namespace) + "/" + path).json()
        a.report("not set" if value is None else str(value), {path: value})

    get_.__doc__ = f"Show the limit on {what} of NAMESPACE."

    @admin_command(group, f"remove-{verb}", "namespace", NAMESPACE)
    def remove_(a: AdminContext, namespace: str) -> None:
        a.client.request("DELETE", namespace_path(namespace) + "/" + path)
        a.done(f"Removed {verb} of {namespace}", namespace=namespace)

    remove_.__doc__ = f"Remove the limit on {what} of NAMESPACE (the broker's configuration applies)."


def backlog_quota_body(limit: str | None, limit_time: str | None, policy: str) -> dict[str, Any]:
    """The JSON of a backlog quota (namespace or topic level) from its command line options."""
    body: dict[str, Any] = {"policy": policy}
    if limit is not None:
        body["limitSize"] = parse_size_bytes(limit, "'-l' / '--limit'")
    if limit_time is not None:
        body["limitTime"] = parse_duration_seconds(limit_time, "'-lt' / '--limitTime'")
    return body


@admin_command(None, "set-backlog-quota", "namespace", NAMESPACE)
@click.option("--limit", "-l", "limit", default=None, help="Backlog size limit: bytes, 10M, 16G; -1 no limit.")
@click.option("--limitTime", "-lt", "limit_time", default=None, help="Backlog age limit: seconds, 10m, 1h.")
@click.option("--policy", "-p", type=click.Choice(QUOTA_POLICIES), required=True,
              help="What happens once the backlog passes the limit.")
@click.option("--type", "-t", "kind", type=click.Choice(["destination_storage", "message_age"]),
              default="destination_storage", show_default=True, help="Which limit this quota sets.")
def set_backlog_quota(a: AdminContext, namespace: str, limit: str | None, limit_time: str | None,
                      policy: str, kind: str) -> None:
    """Set the backlog quota of NAMESPACE."""
    body = backlog_quota_body(limit, limit_time, policy)
    a.client.request("POST", namespace_path(namespace) + "/backlogQuota", body, query={"backlogQuotaType": kind})
    a.done(f"Set the {kind} backlog quota of {namespace}", namespace=namespace, **body)


@admin_command(None, "get-backlog-quotas", "namespace", NAMESPACE)
def get_backlog_quotas(a: AdminContext, namespace: str) -> None:
    """Show the backlog quotas of NAMESPACE."""
    quotas = a.client.get_json(namespace_path(namespace) + "/backlogQuotaMap") or {}
    if a.json:
        a.report("", quotas)
        return
    if not quotas:
        click.echo("no backlog quota")
    for kind, q in sorted(quotas.items()):
        click.echo(f"{kind}: limitSize={q.get('limitSize')} limitTime={q.get('limitTime')} policy={q.get('policy')}")


@admin_command(None, "remove-backlog-quota", "namespace", NAMESPACE)
@click.option("--type", "-t", "kind", type=click.Choice(["destination_storage", "message_age"]),
              default="destination_storage", show_default=True)
def remove_backlog_quota(a: AdminContext, namespace: str, kind: str) -> None:
    """Remove a backlog quota of NAMESPACE."""
    a.client.request("DELETE", namespace_path(namespace) + "/backlogQuota", query={"backlogQuotaType": kind})
    a.done(f"Removed the {kind} backlog quota of {namespace}", namespace=namespace)


@admin_command(None, "set-delayed-delivery", "namespace", NAMESPACE)
@click.option("--enable/--disable", "-e/-d", "enable", default=None, help="Honour deliver_at / deliver_after.")
@click.option("--time", "-t", "tick", default="1s", show_default=True, help="Tick time of the delayed index.")
def set_delayed_delivery(a: AdminContext, namespace: str, enable: bool | None, tick: str) -> None:
    """Turn delayed delivery on or off for NAMESPACE (off: delayed messages are delivered at once)."""
    if enable is None:
        raise click.UsageError("say --enable or --disable")
    seconds = parse_duration_seconds(tick, "'-t' / '--time'")
    body = {"active": enable, "tickTime": max(1, seconds) * 1000}
    a.client.request("POST", namespace_path(namespace) + "/delayedDelivery", body)
    a.done(f"Delayed delivery {'enabled' if enable else 'disabled'} for {namespace}", namespace=namespace, **body)


@admin_command(None, "get-delayed-delivery", "namespace", NAMESPACE)
def get_delayed_delivery(a: AdminContext, namespace: str) -> None:
    """Show the delayed delivery policy of NAMESPACE."""
    value = a.client.request("GET", namespace_path(namespace) + "/delayedDelivery").json()
    a.report("not set" if value is None else f"active={value['active']} tickTime={value['tickTime']}", value)


@admin_command(None, "remove-delayed-delivery", "namespace", NAMESPACE)
def remove_delayed_delivery(a: AdminContext, namespace: str) -> None:
    """Remove the delayed delivery policy of NAMESPACE (delayed delivery is on)."""
    a.client.request("DELETE", namespace_path(namespace) + "/delayedDelivery")
    a.done(f"Removed the delayed delivery policy of {namespace}", namespace=namespace)


@admin_command(None, "set-auto-topic-creation", "namespace", NAMESPACE)
@click.option("--enable/--disable", "-e/-d", "enable", default=None,
              help="Allow producers and consumers to create topics that do not exist.")
@click.option("--type", "-t", "kind", type=click.Choice(["non-partitioned", "partitioned"]),
              default="non-partitioned", show_default=True)
@click.option("--num-partitions", "-n", type=click.IntRange(min=1), default=None,
              help="Partitions of an auto-created partitioned topic.")
def set_auto_topic_creation(a: AdminContext, namespace: str, enable: bool | None, kind: str,
                            num_partitions: int | None) -> None:
    """Override the broker's auto topic creation for NAMESPACE."""
    if enable is None:
        raise click.UsageError("say --enable or --disable")
    body: dict[str, Any] = {"allowAutoTopicCreation": enable, "topicType": kind}
    if num_partitions is not None:
        body["defaultNumPartitions"] = num_partitions
    a.client.request("POST", namespace_path(namespace) + "/autoTopicCreation", body)
    a.done(f"Auto topic creation {'enabled' if enable else 'disabled'} for {namespace}", namespace=namespace)


@admin_command(None, "get-auto-topic-creation", "namespace", NAMESPACE)
def get_auto_topic_creation(a: AdminContext, namespace: str) -> None:
    """Show the auto topic creation override of NAMESPACE."""
    value = a.client.request("GET", namespace_path(namespace) + "/autoTopicCreation").json()
    a.report("not set (the broker's configuration applies)" if value is None else str(value), value)


@admin_command(None, "remove-auto-topic-creation", "namespace", NAMESPACE)
def remove_auto_topic_creation(a: AdminContext, namespace: str) -> None:
    """Remove the auto topic creation override of NAMESPACE."""
    a.client.request("DELETE", namespace_path(namespace) + "/autoTopicCreation")
    a.done(f"Removed the auto topic creation override of {namespace}", namespace=namespace)


def _get_remove_verbs(group: click.Group, verb: str, path: str) -> None:
    @admin_command(group, f"get-{verb}", "namespace", NAMESPACE)
    def get_(a: AdminContext, namespace: str) -> None:
        value = a.client.request("GET", namespace_path(namespace) + "/" + path).json()
        a.report("not set" if value is None else ", ".join(f"{k}={v}" for k, v in value.items()), value)

    get_.__doc__ = f"Show the {verb} policy of NAMESPACE."

    @admin_command(group, f"remove-{verb}", "namespace", NAMESPACE)
    def remove_(a: AdminContext, namespace: str) -> None:
        a.client.request("DELETE", namespace_path(namespace) + "/" + path)
        a.done(f"Removed the {verb} policy of {namespace}", namespace=namespace)

    remove_.__doc__ = f"Remove the {verb} policy of NAMESPACE."


def rate_body(msg_rate: int, byte_rate: int, period: int) -> dict[str, Any]:
    """The JSON of a dispatch rate (namespace or topic level)."""
    return {"dispatchThrottlingRateInMsg": msg_rate, "dispatchThrottlingRateInByte": byte_rate,
            "ratePeriodInSecond": period}


def inactive_topic_policies_body(enable: bool | None, duration: str, mode: str) -> dict[str, Any]:
    """The JSON of an inactive-topic policy (namespace or topic level); -e or -d must be said."""
    if enable is None:
        raise click.UsageError("say -e (--enable-delete-while-inactive) or -d (--disable-delete-while-inactive)")
    return {"inactiveTopicDeleteMode": mode, "deleteWhileInactive": enable,
            "maxInactiveDurationSeconds": parse_duration_seconds(duration, "'-t' / '--max-inactive-duration'")}


_RATE_OPTIONS = (
    click.option("--msg-dispatch-rate", "-md", "msg_rate", type=click.IntRange(min=-1), default=-1,
                 show_default=True, help="Messages per period; -1 no limit."),
    click.option("--byte-dispatch-rate", "-bd", "byte_rate", type=click.IntRange(min=-1), default=-1,
                 show_default=True, help="Bytes per period; -1 no limit."),
    click.option("--dispatch-rate-period", "-dt", "period", type=click.IntRange(min=1), default=1,
                 show_default=True, help="Period in seconds."),
)


def _rate_options(f: Any) -> Any:
    for option in reversed(_RATE_OPTIONS):
        f = option(f)
    return f


@admin_command(None, "set-dispatch-rate", "namespace", NAMESPACE)
@_rate_options
def set_dispatch_rate(a: AdminContext, namespace: str, msg_rate: int, byte_rate: int, period: int) -> None:
    """Limit how fast each topic of NAMESPACE dispatches (all its subscriptions together)."""
    body = rate_body(msg_rate, byte_rate, period)
    a.client.request("POST", namespace_path(namespace) + "/dispatchRate", body)
    a.done(f"Set the dispatch rate of {namespace}", namespace=namespace, **body)


@admin_command(None, "set-subscription-dispatch-rate", "namespace", NAMESPACE)
@_rate_options
def set_subscription_dispatch_rate(a: AdminContext, namespace: str, msg_rate: int, byte_rate: int,
                                   period: int) -> None:
    """Limit how fast each subscription of NAMESPACE's topics dispatches."""
    body = rate_body(msg_rate, byte_rate, period)
    a.client.request("POST", namespace_path(namespace) + "/subscriptionDispatchRate", body)
    a.done(f"Set the subscription dispatch rate of {namespace}", namespace=namespace, **body)


@admin_command(None, "set-inactive-topic-policies", "namespace", NAMESPACE)
@click.option("--enable-delete-while-inactive/--disable-delete-while-inactive", "-e/-d", "enable", default=None,
              help="Delete topics once inactive.")
@click.option("--max-inactive-duration", "-t", "duration", required=True,
              help="How long a topic stays inactive before deletion: seconds, 10m, 1h.")
@click.option("--delete-mode", "-m", "mode",
              type=click.Choice(["delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"]),
              required=True, help="What inactive means besides having no producers and consumers.")
def set_inactive_topic_policies(a: AdminContext, namespace: str, enable: bool | None, duration: str,
                                mode: str) -> None:
    """Delete the inactive topics of NAMESPACE."""
    body = inactive_topic_policies_body(enable, duration, mode)
    a.client.request("POST", namespace_path(namespace) + "/inactiveTopicPolicies", body)
    a.done(f"Set the inactive topic policies of {namespace}", namespace=namespace, **body)
