# Redrive tasks (letterbox extension; broker/moves/redrive_tasks.py does the work):
#   GET    /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/redriveTasks       the DLQ's tasks
#   GET    /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/redrive/{taskId}   one task's progress
#   DELETE /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/redrive/{taskId}   cancel it
# A task id is 16 hex digits (answered by POST .../letterbox/redrive with
# `background: true`, or in the Letterbox-Redrive-Task header of a redrive run
# inside its request): anything else is 400, an id that is not a task of
# this DLQ 404, cancelling a task that already ended 409, each with a reason.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, topic_name
from letterbox.admin.topic_lookup import persistent_topic
from letterbox.broker import TASK_ID, RedriveTask

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = RedriveTaskRoutes(admin)
    router.add_get(TOPIC_BASE + "/letterbox/redriveTasks", routes.list_tasks)
    router.add_get(TOPIC_BASE + "/letterbox/redrive/{taskId}", routes.get_task)
    router.add_delete(TOPIC_BASE + "/letterbox/redrive/{taskId}", routes.cancel_task)


class RedriveTaskRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.tasks = admin.service.redrive_tasks

    def _task(self, request: web.Request) -> RedriveTask:
        task_id = request.match_info["taskId"]
        if not TASK_ID.match(task_id):
            raise AdminError(400, f"Invalid redrive task id {task_id[:40]!r}: a task id is 16 hex digits, as "
                                  "answered by POST .../letterbox/redrive with \"background\": true")
        dlq = topic_name(request)
        persistent_topic(self.admin, dlq, "Redrive tasks")
        task = self.tasks.get(task_id)
        if task is None or task.dlq != str(dlq):
            raise AdminError(404, f"No redrive task {task_id} on {dlq} (list them with GET "
                                  f"{request.path.rsplit('/', 1)[0]}Tasks)")
        return task

    async def list_tasks(self, request: web.Request) -> web.Response:
        dlq = topic_name(request)
        persistent_topic(self.admin, dlq, "Redrive tasks")
        return web.json_response([t.view() for t in self.tasks.of_dlq(dlq)])

    async def get_task(self, request: web.Request) -> web.Response:
        return web.json_response(self._task(request).view())

    async def cancel_task(self, request: web.Request) -> web.Response:
        task = self._task(request)
        cancelled = await self.tasks.cancel(task.id)
        if cancelled is None:
            raise AdminError(409, f"Redrive task {task.id} is not running (it is {task.state}); "
                                  "nothing to cancel")
        return web.json_response({**cancelled.view(), "cancelled": True})
