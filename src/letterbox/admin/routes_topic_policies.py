# Topic-level policies at Pulsar's admin v2 paths under .../{domain}/{t}/{ns}/{topic}/:
# backlogQuota (POST/DELETE, ?backlogQuotaType=) and backlogQuotaMap (GET),
# maxProducers, maxConsumers, maxUnackedMessagesOnConsumer,
# maxUnackedMessagesOnSubscription, delayedDelivery, dispatchRate,
# subscriptionDispatchRate, inactiveTopicPolicies (GET/POST/DELETE each). Same bodies
# and checks as the namespace policies (routes_namespace_limits.py); a policy set on
# the topic wins over the namespace's (broker/policies/topic_policies.py). A partitioned
# topic's policies apply to all its partitions. 404 for a topic that does not exist.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, Handler, no_content
from letterbox.admin.request_parsing import TOPIC_BASE, json_body, topic_name
from letterbox.admin.routes_namespace_limits import VALIDATORS, quota_kind, quota_request
from letterbox.broker import SUBSCRIPTION_RATE, TOPIC_RATE, inactive_topics
from letterbox.broker import topic_policies as tp
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker import BrokerService

# path under the topic -> (policy document key, validator name in VALIDATORS)
POLICIES: dict[str, tuple[str, str]] = {
    "/maxProducers": (tp.MAX_PRODUCERS, "count"),
    "/maxConsumers": (tp.MAX_CONSUMERS, "count"),
    "/maxUnackedMessagesOnConsumer": (tp.MAX_UNACKED_CONSUMER, "count"),
    "/maxUnackedMessagesOnSubscription": (tp.MAX_UNACKED_SUBSCRIPTION, "count"),
    "/delayedDelivery": (tp.DELAYED_DELIVERY, "delayedDelivery"),
    "/dispatchRate": (TOPIC_RATE, "dispatchRate"),
    "/subscriptionDispatchRate": (SUBSCRIPTION_RATE, "dispatchRate"),
    "/inactiveTopicPolicies": (inactive_topics.POLICY_KEY, "inactiveTopicPolicies"),
}


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = TopicPolicyRoutes(admin.service)
    for path, (key, validator) in POLICIES.items():
        router.add_get(TOPIC_BASE + path, routes.getter(key))
        router.add_post(TOPIC_BASE + path, routes.setter(key, validator, path[1:]))
        router.add_delete(TOPIC_BASE + path, routes.remover(key))
    router.add_get(TOPIC_BASE + "/backlogQuotaMap", routes.quota_map)
    router.add_post(TOPIC_BASE + "/backlogQuota", routes.set_quota)
    router.add_delete(TOPIC_BASE + "/backlogQuota", routes.remove_quota)


class TopicPolicyRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    def _topic(self, request: web.Request) -> TopicName:
        name = topic_name(request)
        if self.service.partitions_of(name) == 0 and not self.service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        if name.partition_index >= 0 and self.service.partitions_of(name.partitioned_parent) > 0:
            raise AdminError(412, f"{name} is a partition: set policies on {name.partitioned_parent}")
        return name

    def getter(self, key: str) -> Handler:
        async def get(request: web.Request) -> web.Response:
            value = (tp.topic_document(self.service, self._topic(request)) or {}).get(key)
            return no_content() if value is None else web.json_response(value)

        return get

    def setter(self, key: str, validator: str, what: str) -> Handler:
        async def post(request: web.Request) -> web.Response:
            body = await json_body(request)
            if body is None:
                raise AdminError(400, "Request body is required")
            value = VALIDATORS[validator](body, what)
            await tp.update_topic_policy(self.service, self._topic(request), key, value)
            return no_content()

        return post

    def remover(self, key: str) -> Handler:
        async def delete(request: web.Request) -> web.Response:
            await tp.update_topic_policy(self.service, self._topic(request), key, None)
            return no_content()

        return delete

    def _quotas(self, name: TopicName) -> dict[str, Any]:
        return dict((tp.topic_document(self.service, name) or {}).get(tp.BACKLOG_QUOTA) or {})

    async def quota_map(self, request: web.Request) -> web.Response:
        return web.json_response(self._quotas(self._topic(request)))

    async def set_quota(self, request: web.Request) -> web.Response:
        kind, quota = await quota_request(request)
        name = self._topic(request)
        quotas = self._quotas(name)
        quotas[kind] = quota
        await tp.update_topic_policy(self.service, name, tp.BACKLOG_QUOTA, quotas)
        return no_content()

    async def remove_quota(self, request: web.Request) -> web.Response:
        kind = quota_kind(request)
        name = self._topic(request)
        quotas = self._quotas(name)
        quotas.pop(kind, None)
        await tp.update_topic_policy(self.service, name, tp.BACKLOG_QUOTA, quotas or None)
        return no_content()
