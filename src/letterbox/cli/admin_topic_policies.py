# `letterbox admin topics set-/get-/remove-<policy> TOPIC`: topic-level policies with
# pulsar-admin's `topics` verb names (set-max-producers, set-backlog-quota,
# set-dispatch-rate, ...) over .../{topic}/<policy> (admin/routes_topic_policies.py).
# A policy set on a topic wins over its namespace's.
from __future__ import annotations

import click

from letterbox.cli.admin_namespace_limits import (
    backlog_quota_body,
    inactive_topic_policies_body,
    rate_body,
)
from letterbox.cli.admin_topics import topics
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.params import TOPIC, topic_path
from letterbox.topic_name import TopicName

QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
QUOTA_TYPES = click.Choice(["destination_storage", "message_age"])
# verb -> (path under the topic, option name, help)
_COUNTS = {
    "max-producers": ("maxProducers", "--max-producers", "producers on the topic"),
    "max-consumers": ("maxConsumers", "--max-consumers", "consumers on the topic"),
    "max-unacked-messages-on-consumer": ("maxUnackedMessagesOnConsumer", "--max-unacked",
                                         "unacknowledged messages per consumer"),
    "max-unacked-messages-on-subscription": ("maxUnackedMessagesOnSubscription", "--max-unacked",
                                             "unacknowledged messages per subscription"),
}
_OTHERS = {"backlog-quota": "backlogQuota", "delayed-delivery": "delayedDelivery", "dispatch-rate": "dispatchRate",
           "subscription-dispatch-rate": "subscriptionDispatchRate",
           "inactive-topic-policies": "inactiveTopicPolicies"}


def _count_verb(verb: str, path: str, option: str, what: str) -> None:
    @admin_command(topics, f"set-{verb}", "topic", TOPIC)
    @click.option(option, "value", type=click.IntRange(min=0), required=True, help=f"Most {what}; 0 no limit.")
    def set_(a: AdminContext, topic: TopicName, value: int) -> None:
        a.client.request("POST", topic_path(topic) + "/" + path, value)
        a.done(f"Set {verb} of {topic} to {value}", topic=str(topic), **{path: value})

    set_.__doc__ = f"Limit the {what} (wins over the namespace's policy)."


def _get_remove_verbs(verb: str, path: str) -> None:
    get_path = "backlogQuotaMap" if path == "backlogQuota" else path

    @admin_command(topics, f"get-{verb}" + ("s" if path == "backlogQuota" else ""), "topic", TOPIC)
    def get_(a: AdminContext, topic: TopicName) -> None:
        value = a.client.request("GET", topic_path(topic) + "/" + get_path).json()
        text = "not set" if value in (None, {}) else (
            ", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else str(value))
        a.report(text, value)

    get_.__doc__ = f"Show the topic's own {verb} policy."

    @admin_command(topics, f"remove-{verb}", "topic", TOPIC)
    def remove_(a: AdminContext, topic: TopicName) -> None:
        a.client.request("DELETE", topic_path(topic) + "/" + path)
        a.done(f"Removed the {verb} policy of {topic}", topic=str(topic))

    remove_.__doc__ = f"Remove the topic's own {verb} policy (the namespace's applies)."


for _verb, (_path, _option, _what) in _COUNTS.items():
    _count_verb(_verb, _path, _option, _what)
    _get_remove_verbs(_verb, _path)
for _verb, _path in _OTHERS.items():
    _get_remove_verbs(_verb, _path)


@admin_command(topics, "set-backlog-quota", "topic", TOPIC)
@click.option("--limit", "-l", default=None, help="Backlog size limit: bytes, 10M, 16G; -1 no limit.")
@click.option("--limitTime", "-lt", "limit_time", default=None, help="Backlog age limit: seconds, 10m, 1h.")
@click.option("--policy", "-p", type=click.Choice(QUOTA_POLICIES), required=True)
@click.option("--type", "-t", "kind", type=QUOTA_TYPES, default="destination_storage", show_default=True)
def set_backlog_quota(a: AdminContext, topic: TopicName, limit: str | None, limit_time: str | None, policy: str,
                      kind: str) -> None:
    """Set the topic's backlog quota (wins over the namespace's)."""
    body = backlog_quota_body(limit, limit_time, policy)
    a.client.request("POST", topic_path(topic) + "/backlogQuota", body, query={"backlogQuotaType": kind})
    a.done(f"Set the {kind} backlog quota of {topic}", topic=str(topic), **body)


@admin_command(topics, "set-delayed-delivery", "topic", TOPIC)
@click.option("--enable/--disable", "-e/-d", "enable", default=None)
def set_delayed_delivery(a: AdminContext, topic: TopicName, enable: bool | None) -> None:
    """Turn delayed delivery on or off for the topic."""
    if enable is None:
        raise click.UsageError("say --enable or --disable")
    body = {"active": enable, "tickTime": 1000}
    a.client.request("POST", topic_path(topic) + "/delayedDelivery", body)
    a.done(f"Delayed delivery {'enabled' if enable else 'disabled'} for {topic}", topic=str(topic))


def _rate(path: str, verb: str) -> None:
    @admin_command(topics, f"set-{verb}", "topic", TOPIC)
    @click.option("--msg-dispatch-rate", "-md", "msg_rate", type=click.IntRange(min=-1), default=-1)
    @click.option("--byte-dispatch-rate", "-bd", "byte_rate", type=click.IntRange(min=-1), default=-1)
    @click.option("--dispatch-rate-period", "-dt", "period", type=click.IntRange(min=1), default=1)
    def set_(a: AdminContext, topic: TopicName, msg_rate: int, byte_rate: int, period: int) -> None:
        body = rate_body(msg_rate, byte_rate, period)
        a.client.request("POST", topic_path(topic) + "/" + path, body)
        a.done(f"Set the {verb} of {topic}", topic=str(topic), **body)

    set_.__doc__ = f"Set the topic's {verb} (messages / bytes per period; -1 no limit)."


_rate("dispatchRate", "dispatch-rate")
_rate("subscriptionDispatchRate", "subscription-dispatch-rate")


@admin_command(topics, "set-inactive-topic-policies", "topic", TOPIC)
@click.option("--enable-delete-while-inactive/--disable-delete-while-inactive", "-e/-d", "enable", default=None)
@click.option("--max-inactive-duration", "-t", "duration", required=True)
@click.option("--delete-mode", "-m", "mode", required=True,
              type=click.Choice(["delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"]))
def set_inactive_topic_policies(a: AdminContext, topic: TopicName, enable: bool | None, duration: str,
                                mode: str) -> None:
    """Delete the topic once inactive (wins over the namespace's policy)."""
    body = inactive_topic_policies_body(enable, duration, mode)
    a.client.request("POST", topic_path(topic) + "/inactiveTopicPolicies", body)
    a.done(f"Set the inactive topic policies of {topic}", topic=str(topic), **body)
