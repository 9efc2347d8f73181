# Topic compaction over HTTP (Pulsar admin v2 paths; the runs are broker/compaction/compactor.py's):
#   PUT .../{topic}/compaction   start a compaction: 204; 409 while one runs on the topic;
#                                a partitioned topic compacts every partition
#   GET .../{topic}/compaction   its status, Pulsar's LongRunningProcessStatus:
#                                {"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError": ""}
#   GET/PUT/POST/DELETE /admin/v2/namespaces/{t}/{ns}/compactionThreshold (PUT as Pulsar)
#                                the namespace's automatic compaction threshold in bytes of
#                                backlog after the horizon (body: an integer; 0 turns it off;
#                                not an integer 400, negative 412)
# Unknown topics answer 404; the rules are TENANT_ADMIN (admin/access_rules.py, as Pulsar's
# COMPACT topic operation and namespace policies).
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import NAMESPACE_BASE, TOPIC_BASE, topic_name
from letterbox.admin.routes_namespace_policies import PolicyRoutes
from letterbox.admin.topic_lookup import partition_targets, persistent_topic
from letterbox.broker import THRESHOLD_POLICY, CompactionInProgress

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

COMPACTION_PATH = TOPIC_BASE + "/compaction"
THRESHOLD_PATH = NAMESPACE_BASE + "/compactionThreshold"
MAX_INT64 = 2**63 - 1


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    compactor = admin.service.compactor

    async def trigger(request: web.Request) -> web.Response:
        topics = partition_targets(admin, topic_name(request), "Compaction")
        busy = [str(t.name) for t in topics if compactor.running(str(t.name))]
        if busy:
            raise AdminError(409, f"Compaction already in progress for {', '.join(busy)}")
        for topic in topics:
            try:
                compactor.trigger(topic)
            except CompactionInProgress as exc:
                raise AdminError(409, str(exc)) from exc
        return no_content()

    async def status(request: web.Request) -> web.Response:
        topic = persistent_topic(admin, topic_name(request), "Compaction status")
        return web.json_response(compactor.status(str(topic.name)))

    router.add_put(COMPACTION_PATH, trigger)
    router.add_get(COMPACTION_PATH, status)
    policies = PolicyRoutes(admin)
    router.add_get(THRESHOLD_PATH, policies.getter(THRESHOLD_POLICY))
    router.add_post(THRESHOLD_PATH, policies.setter(THRESHOLD_POLICY, _threshold))
    router.add_put(THRESHOLD_PATH, policies.setter(THRESHOLD_POLICY, _threshold))  # Pulsar's method
    router.add_delete(THRESHOLD_PATH, policies.remover(THRESHOLD_POLICY))


def _threshold(body: Any) -> int:
    if isinstance(body, bool) or not isinstance(body, int):
        raise AdminError(400, f"Body must be the compaction threshold in bytes (an integer), got {body!r}")
    if not 0 <= body <= MAX_INT64:
        raise AdminError(412, f"compactionThreshold must be 0 or more (at most {MAX_INT64}), got {body}")
    return body
