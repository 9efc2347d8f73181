# A namespace's failure events policy (letterbox extension; failure/events.py says what the
# events are, broker/moves/failure_events.py publishes them):
#   GET    /admin/v2/namespaces/{t}/{ns}/letterbox/failureEvents
#          -> 200 {"enabled", "retentionTimeInMinutes", "retentionSizeInMB", "topic"}
#   POST   (same path) {"enabled": true, "retentionTimeInMinutes": 10080, "retentionSizeInMB": 100}
#          -> 204; the events topic persistent://{t}/{ns}/__letterbox_failure_events then
#          receives an event for every nack with a reason, dead letter, terminate, park,
#          redrive and edit of the namespace's topics, kept by this retention
#   DELETE (same path) -> 204: no more events (the topic and what it holds stay)
# Tenant admins, as the namespace's other policies. Errors: 400 a field that is wrong (named),
# 404 a namespace that does not exist.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import NAMESPACE_BASE, json_body, namespace_of
from letterbox.broker import namespace_policies
from letterbox.failure import PolicyError
from letterbox.failure.events import FailureEventsPolicy, events_topic_name

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

FAILURE_EVENTS_PATH = NAMESPACE_BASE + "/letterbox/failureEvents"


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    policies = admin.service.namespace_policies

    def namespace(request: web.Request) -> tuple[str, dict[str, object]]:
        ns = namespace_of(request)
        doc = policies.document(ns)
        if doc is None:
            raise AdminError(404, f"Namespace {ns} does not exist")
        return ns, doc

    async def get(request: web.Request) -> web.Response:
        ns, doc = namespace(request)
        stored = doc.get(namespace_policies.FAILURE_EVENTS)
        try:
            policy = FailureEventsPolicy.from_json(stored) if stored else FailureEventsPolicy()
        except PolicyError:
            policy = FailureEventsPolicy()  # edited by hand into something unreadable: off
        return web.json_response({**policy.to_json(), "topic": events_topic_name(ns)})

    async def post(request: web.Request) -> web.Response:
        body = await json_body(request)
        try:
            policy = FailureEventsPolicy.from_json(body)
        except PolicyError as exc:
            raise AdminError(400, str(exc)) from None
        ns, _ = namespace(request)
        await policies.update(ns, namespace_policies.FAILURE_EVENTS, policy.to_json())
        return no_content()

    async def delete(request: web.Request) -> web.Response:
        ns, _ = namespace(request)
        await policies.update(ns, namespace_policies.FAILURE_EVENTS, None)
        return no_content()

    router.add_get(FAILURE_EVENTS_PATH, get)
    router.add_post(FAILURE_EVENTS_PATH, post)
    router.add_delete(FAILURE_EVENTS_PATH, delete)
