# Resolving the topic and subscription an admin request names, with Pulsar's
# errors: 404 for an unknown topic or subscription, 405 where an operation is
# not allowed on a non-persistent or partitioned topic. Operations Pulsar
# applies to every partition of a partitioned topic use partition_targets.
# Also the HTTP topic lookup's answer (`GET /lookup/v2/topic/...`, lookup_data):
# with advertisedListeners, the listener the client names in the `listenerName`
# query parameter (else the `X-Pulsar-ListenerName` header, as Pulsar reads them),
# the internal listener without a name; an unknown name is a 500 naming the
# listeners, as Pulsar answers it. Without advertisedListeners, this broker's own
# URLs, and a 500 for any listener name (as in the binary LOOKUP).
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.admin.http_errors import AdminError
from letterbox.advertised_listeners import internal_name, unknown_listener
from letterbox.advertised_listeners import parse as parse_listeners
from letterbox.advertised_listeners import select as select_listener
from letterbox.errors import ServiceNotReady
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from aiohttp import web

    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker import PersistentTopic, Subscription


def persistent_topic(admin: AdminContext, name: TopicName, what: str) -> PersistentTopic:
    """A non-partitioned persistent topic (or one partition); `what` names the
    operation in the error of a partitioned or non-persistent topic."""
    if not name.persistent:
        raise AdminError(405, f"{what} on a non-persistent topic is not allowed")
    if admin.service.partitions_of(name) > 0:
        raise AdminError(405, f"{what} on a partitioned topic is not allowed; use one of its partitions")
    if not admin.service.topic_exists(name):
        raise AdminError(404, f"Topic {name} not found")
    return admin.service.persistent_topic(name, create=False)


def partition_targets(admin: AdminContext, name: TopicName, what: str) -> list[PersistentTopic]:
    """The topic itself, or every partition of a partitioned topic."""
    if not name.persistent:
        raise AdminError(405, f"{what} on a non-persistent topic is not allowed")
    n = admin.service.partitions_of(name)
    if n == 0:
        return [persistent_topic(admin, name, what)]
    topics: list[PersistentTopic] = []
    for i in range(n):
        topics.append(admin.service.persistent_topic(name.partition(i), create=True))
    return topics


def subscription(topic: PersistentTopic, name: str) -> Subscription:
    sub = topic.subscriptions.get(name)
    if sub is None or not sub.durable:
        raise AdminError(404, f"Subscription {name} not found on topic {topic.name}")
    return sub


LISTENER_PARAM = "listenerName"
LISTENER_HEADER = "X-Pulsar-ListenerName"


def requested_listener(request: web.Request) -> str:
    """The listener a lookup names: the query parameter wins over the header ('' = none)."""
    return request.query.get(LISTENER_PARAM) or request.headers.get(LISTENER_HEADER) or ""


def lookup_data(admin: AdminContext, request: web.Request, own: dict[str, str]) -> dict[str, str]:
    """Pulsar's LookupData for a topic of this broker; `own` is its ClusterData URLs."""
    http, https = own.get("serviceUrl") or own.get("serviceUrlTls", ""), own.get("serviceUrlTls", "")
    cfg = admin.service.config
    if cfg.advertised_listeners:
        listeners = parse_listeners(cfg.advertised_listeners)
        try:
            plain, tls = select_listener(listeners, internal_name(listeners, cfg.internal_listener_name),
                                         requested_listener(request))
        except ServiceNotReady as exc:
            raise AdminError(500, str(exc)) from None
        tls = tls or ""
    elif requested_listener(request):  # no advertisedListeners: no named listener, as Pulsar
        raise AdminError(500, str(unknown_listener(requested_listener(request), {})))
    else:
        plain = own.get("brokerServiceUrl") or own.get("brokerServiceUrlTls", "")
        tls = own.get("brokerServiceUrlTls", "")
    # Pulsar's LookupData: the TLS URLs only when there are some, and brokerUrlSsl always
    data = {"brokerUrl": plain, "httpUrl": http, "nativeUrl": plain, "brokerUrlSsl": tls}
    if tls:
        data["brokerUrlTls"] = tls
    if https:
        data["httpUrlTls"] = https
    return data
